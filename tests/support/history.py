"""Event histories for the projection tests and benchmarks, written by the real admission core.

:func:`build_history` plays senders, branch workers and operators around
``streams.core.admission``: deliveries are taken in by the front doors' intake
(``streams.core.intake``), and every record on ``runs`` and ``tasks`` is what ``decide`` (with
``evolve``, state per admission key, due timers fired before each command as the engine does)
answered to the commands the simulation gave it, routed as the admission app routes it. So the
history cannot drift from what the processor really writes. It holds workflow revisions,
deliveries with their one outcome each (admitted, deduplicated, conflicts, rejections beyond
the horizon or for an unknown destination), runs with their launches, workers' claims (some
sent twice, some after their attempt timed out) and the accepted facts, relaunches and slots
the processor failed, status changes, reruns (one of them requested twice) and evictions.
Each run's proposing slot proposes an entry when it completes; admission's hand-offs go to
``candidates`` and are decided by the real gate core (``streams.core.gate``, state per scope
key, due timers first), whose outcomes go to ``gate-decisions`` and ``actions``: some
candidates are dispatched, most expire, others are superseded or withdrawn.

Each occurrence keeps its own clock (the core is per key, and the engine fires a key's timers
at its own due times); the occurrences are interleaved at random, in causal order within
each. Every event names the topic it belongs on and its key. The result is deterministic for
a given ``random.Random`` state; ``tag`` goes into every id, so histories built with
different tags never collide.
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import sql as psycopg_sql

from schemas.codec import encode
from schemas.commands import (
    AuthorizeRerun,
    ReportBranchCompleted,
    ReportBranchFailed,
    ReportBranchSkipped,
    ReportBranchStarted,
)
from schemas.events import (
    ActionDispatched,
    CandidateProposed,
    DispatchRequested,
    DispatchWithdrawn,
    WorkflowRevised,
)
from schemas.records import Record
from schemas.topics import (
    ACTIONS,
    BRANCH_RESULTS,
    CANDIDATES,
    DELIVERIES,
    GATE_DECISIONS,
    WORKFLOWS,
    TopicSpec,
)
from streams.apps.admission import topic_of
from streams.core import gate
from streams.core.admission import (
    AdmissionEvent,
    Admit,
    CheckTimers,
    Command,
    RecordBranchReport,
    Rerun,
    WorkerReport,
    next_due_ms,
)
from streams.core.durations import format_time
from streams.core.lifecycle import BRANCH
from streams.core.workflow import parse_workflow_file, revise, workflow_key
from streams.kafka.clients import admin_client, transactional_producer
from streams.kafka.topics import ensure_topics
from streams.settings import Settings
from tests.support.admission import delivery_for
from tests.support.core import Processor, contract_document
from tests.support.gate import Gate
from tests.support.kafka import unique_settings, wait_until_stable

BASE_MS = 1_780_000_000_000
SUBSCRIPTIONS = (("btc-breakout", "paper"), ("eth-revert", "live"))
DAY_MS = 86_400_000
TIMEOUT_MS = 30_000


@dataclass(frozen=True)
class Emitted:
    """One record and where it goes: short topic name and message key."""

    topic: str
    key: str
    record: Record


def workflow(
    subscription: str, environment: str, at_ms: int, current: WorkflowRevised | None = None
) -> WorkflowRevised:
    """The README's example workflow for a destination, as ``sluicegate workflows apply``
    writes its next revision (a second one changes the validity window only, so identities
    stay the same)."""
    document = contract_document()
    table = document["workflow"][0]
    table.update(subscription=subscription, environment=environment)
    table["validity"]["window"] = "5s" if current is None else "7s"
    (definition,) = parse_workflow_file(document)
    revised = revise(current, definition, at_ms)
    assert revised is not None
    return revised


_PROPOSAL = (
    '{"ok":true,"proposal":{"kind":"entry","side":"buy","quantity":"0.010",'
    '"limit_price":"97000.5","params":{"rule":"breakout"}}}'
)
"""What the proposing slot (``signal``) of the README's workflow answers in a history."""


class _Clock:
    """One occurrence's clock (epoch ms)."""

    def __init__(self, start: int) -> None:
        self.now = start

    def tick(self, rng: random.Random) -> int:
        self.now += rng.randint(1, 50)
        return self.now


class _World:
    """The real admission core, and the workflows the processor has read."""

    def __init__(self) -> None:
        self.core = Processor()
        self.gate = Gate()
        self.workflows: dict[tuple[str, str], WorkflowRevised] = {}

    def decide(self, key: str, command: Command, now: int) -> list[Emitted]:
        """``command``'s events at ``now``, after the key's due timers (as the engine fires
        them at the start of a batch), each on the topic the admission app routes it to."""
        events: list[AdmissionEvent] = []
        state = self.core.state(key)
        due = None if state is None else next_due_ms(state)
        if not isinstance(command, CheckTimers) and due is not None and due <= now:
            events += self.core.handle(CheckTimers(), now, key)
        events += self.core.handle(command, now, key)
        out: list[Emitted] = []
        for e in events:
            if isinstance(e, CandidateProposed | DispatchRequested | DispatchWithdrawn):
                out.append(Emitted(CANDIDATES.name, e.scope_key, e))
                out.extend(self._gate(e, now))
            else:
                out.append(Emitted(topic_of(e).name, e.admission_key, e))
        return out

    def _gate(
        self, event: CandidateProposed | DispatchRequested | DispatchWithdrawn, now: int
    ) -> list[Emitted]:
        """The gate's decision on one hand-off, after the scope's due timers."""
        scope = event.scope_key
        decided: list[gate.GateEvent] = []
        due = gate.next_due_ms(self.gate.state(scope))
        if due is not None and due <= now:
            decided += self.gate.handle(gate.CheckTimers(), now, scope)
        if isinstance(event, CandidateProposed):
            decided += self.gate.propose(event, now)
        elif isinstance(event, DispatchRequested):
            decided += self.gate.request(event, now)
        else:
            decided += self.gate.withdraw(event, now)
        return [
            Emitted(ACTIONS.name, e.run_id, e)
            if isinstance(e, ActionDispatched)
            else Emitted(GATE_DECISIONS.name, e.scope_key, e)
            for e in decided
            if not isinstance(e, DispatchRequested)  # held: state only
        ]


def _on(spec: TopicSpec, key: str, record: Record) -> Emitted:
    return Emitted(spec.name, key, record)


def build_history(rng: random.Random, occurrences: int, tag: str = "h") -> list[Emitted]:
    """A causal history of ``occurrences`` occurrences, interleaved at random."""
    world = _World()
    out: list[Emitted] = []
    for n, (sub, env) in enumerate(SUBSCRIPTIONS):
        world.workflows[sub, env] = workflow(sub, env, BASE_MS - DAY_MS + n)
        out.append(_on(WORKFLOWS, workflow_key(sub, env), world.workflows[sub, env]))
    if rng.random() < 0.5:
        sub, env = SUBSCRIPTIONS[0]
        world.workflows[sub, env] = workflow(
            sub, env, BASE_MS - DAY_MS + 9, world.workflows[sub, env]
        )
        out.append(_on(WORKFLOWS, workflow_key(sub, env), world.workflows[sub, env]))
    # Each occurrence is a generator of its own events; interleaving them keeps causal order
    # within an occurrence while mixing occurrences (and so partitions and topics).
    streams = [_Occurrence(world, rng, tag, i).steps() for i in range(occurrences)]
    # One more, in a scope of its own, whose workers finish at once: its entry is dispatched,
    # so every topic of the catalogue holds records.
    streams.append(_Occurrence(world, rng, tag, occurrences, sure=True).steps())
    while streams:
        stream = rng.choice(streams)
        step = next(stream, None)
        if step is None:
            streams.remove(stream)
        else:
            out.extend(step)
    return out


class _Occurrence:
    """One occurrence's senders, workers and operator, against the real core."""

    def __init__(
        self, world: _World, rng: random.Random, tag: str, i: int, *, sure: bool = False
    ) -> None:
        self.world, self.rng, self.tag, self.i, self.sure = world, rng, tag, i, sure
        self.sub, self.env = rng.choice(SUBSCRIPTIONS)
        self.clock = _Clock(BASE_MS + i * 600_000)
        self.kind = rng.choices(
            ("normal", "beyond_horizon", "unknown_subscription", "evicted"), (16, 1, 1, 2)
        )[0]
        if sure:
            self.kind = "normal"
        if self.kind == "evicted":
            # Old enough that its record may leave the state about an hour after admission.
            opened = self.clock.now - 7 * DAY_MS + 10 * 60_000
        elif self.kind == "beyond_horizon":
            opened = self.clock.now - 8 * DAY_MS
        elif sure or rng.random() < 0.5:
            # A candle that closes about now: its entry may still be in time at the gate.
            opened = self.clock.now - 60_000 - rng.randint(0, 1_500)
        else:
            opened = self.clock.now - 2 * 60_000
        self.payload: dict[str, object] = {
            "source": "tradingview",
            "venue": "binance",
            "instrument": "BTCUSDT",
            "interval": "1m",
            "candle_open": format_time(
                opened - opened % 60_000 if opened % 2 and not sure else opened
            ),
            "rule": f"breakout-{tag}-{i}",
            "side": "buy",
            "price": "97000.5",
            "account": f"acc-{tag}-sure" if sure else "acc-1",
        }
        if i % 2 == 0:
            self.payload["event_id"] = f"{tag}-ev-{i}"
        self.key = ""
        self.rejected = self.kind in ("beyond_horizon", "unknown_subscription")

    def steps(self) -> Iterator[list[Emitted]]:
        if self.sure:
            yield self._deliver(f"{self.tag}-d-{self.i}-0")
            state = self.world.core.state(self.key)
            assert state is not None
            for slot in state.original.slots:
                run_id, attempt = state.original.run_id, slot.attempt
                yield self._claim(ReportBranchStarted, run_id, slot.slot, attempt, "w-1")
                yield self._claim(ReportBranchCompleted, run_id, slot.slot, attempt, "w-1")
            return
        for d in range(self.rng.randint(1, 4)):
            yield self._deliver(f"{self.tag}-d-{self.i}-{d}")
            if not self.rejected:
                yield from self._branch_work(partial=True)
        if self.rejected:
            return
        yield from self._branch_work(partial=False)
        if self.rng.random() < 0.2:
            yield from self._rerun(f"{self.tag}-rq-{self.i}")
        if self.kind == "evicted":
            self.clock.now += 2 * 3_600_000
            yield self.world.decide(self.key, CheckTimers(), self.clock.tick(self.rng))

    def _deliver(self, delivery_id: str) -> list[Emitted]:
        wf = self.world.workflows[self.sub, self.env]
        payload = dict(self.payload)
        if self.key and self.rng.random() < 0.15:
            payload["price"] = "97001"  # same identity, other immutable content: a conflict
        received = self.clock.tick(self.rng)
        channel = self.rng.choice(("http", "publish"))
        taken = delivery_for(
            wf, payload, delivery_id=delivery_id, received_at_ms=received, channel=channel
        )
        self.key = taken.admission_key
        decided = self.clock.tick(self.rng)
        # unknown_subscription: a door had read the workflow, the processor not yet.
        command = Admit(taken, None if self.kind == "unknown_subscription" else wf)
        return [
            _on(DELIVERIES, taken.admission_key, taken),
            *self.world.decide(self.key, command, decided),
        ]

    def _rerun(self, request_id: str) -> Iterator[list[Emitted]]:
        state = self.world.core.state(self.key)
        assert state is not None
        request = AuthorizeRerun(
            request_id=request_id,
            admission_key=self.key,
            run_id=state.original.run_id,
            reason="operator asked",
            requested_by="tester",
            requested_at_ms=self.clock.tick(self.rng),
        )
        for _ in range(2 if self.rng.random() < 0.3 else 1):  # a second copy: duplicate_request
            wf = self.world.workflows[self.sub, self.env]
            decided = self.clock.tick(self.rng)
            yield [
                _on(DELIVERIES, self.key, request),
                *self.world.decide(self.key, Rerun(request, wf), decided),
            ]
        yield from self._branch_work(partial=False)

    def _branch_work(self, *, partial: bool) -> Iterator[list[Emitted]]:
        """Workers take each unfinished slot's current attempt; some attempts time out (the
        processor relaunches them, or fails the slot after its last attempt) and some results
        of a timed-out attempt still arrive."""
        rng = self.rng
        for _ in range(8):  # enough rounds for every slot to finish, relaunches included
            state = self.world.core.state(self.key)
            if state is None:
                return
            pending = [
                (run, slot)
                for run in state.runs
                for slot in run.slots
                if not BRANCH.is_terminal(slot.status)
            ]
            if not pending:
                return
            for run, slot in pending:
                if partial and rng.random() < 0.5:
                    continue
                worker = f"w-{rng.randint(1, 3)}"
                yield self._claim(ReportBranchStarted, run.run_id, slot.slot, slot.attempt, worker)
                if rng.random() < 0.12:
                    # No result in time: the next command finds the slot relaunched.
                    self.clock.now += TIMEOUT_MS + 1
                    yield self.world.decide(self.key, CheckTimers(), self.clock.tick(rng))
                    if rng.random() < 0.7:
                        continue  # the new attempt is worked on in the next round
                yield self._finish(run.run_id, slot.slot, slot.attempt, worker)
            if partial:
                return

    def _finish(self, run_id: str, slot: str, attempt: int, worker: str) -> list[Emitted]:
        roll = self.rng.random()
        kind: type[WorkerReport]
        if roll < 0.7:
            kind = ReportBranchCompleted
        elif roll < 0.85:
            kind = ReportBranchFailed
        else:
            kind = ReportBranchSkipped
        claim = self._report(kind, run_id, slot, attempt, worker)
        out = self._send(claim)
        if self.rng.random() < 0.2:
            out += self._send(claim)  # sent twice: counted once
        return out

    def _claim(
        self, kind: type[WorkerReport], run_id: str, slot: str, attempt: int, worker: str
    ) -> list[Emitted]:
        return self._send(self._report(kind, run_id, slot, attempt, worker))

    def _report(
        self, kind: type[WorkerReport], run_id: str, slot: str, attempt: int, worker: str
    ) -> WorkerReport:
        at = self.clock.tick(self.rng)
        who = (run_id, self.key, slot, attempt, worker)
        if kind is ReportBranchStarted:
            return ReportBranchStarted(*who, at)
        if kind is ReportBranchCompleted:
            result = _PROPOSAL if slot == "signal" else '{"ok":true}'
            return ReportBranchCompleted(*who, result, at)
        if kind is ReportBranchFailed:
            return ReportBranchFailed(*who, "boom", at)
        reason = self.rng.choice(("expired_at_dequeue", "not_applicable"))
        return ReportBranchSkipped(*who, reason, at)

    def _send(self, claim: WorkerReport) -> list[Emitted]:
        decided = self.clock.tick(self.rng)
        return [
            _on(BRANCH_RESULTS, self.key, claim),
            *self.world.decide(self.key, RecordBranchReport(claim), decided),
        ]


def aborted_copy(event: Emitted, n: int) -> Emitted:
    """A look-alike of ``event`` whose ids all start with ``aborted-`` (must never show)."""
    record = event.record
    changes: dict[str, object] = {}
    for name in ("run_id", "delivery_id", "request_id", "admission_key"):
        value = getattr(record, name, None)
        if isinstance(value, str):
            changes[name] = f"aborted-{n}-{value}"
    return Emitted(event.topic, event.key, dataclasses.replace(record, **changes))  # type: ignore[arg-type]


def produce_history(
    settings: Settings,
    history: list[Emitted],
    *,
    rng: random.Random,
    transaction_size: int = 50,
    abort_every: int = 5,
) -> int:
    """Write ``history`` with a transactional producer, in transactions of random size.

    Every ``abort_every``-th transaction is preceded by an aborted one holding look-alikes
    (:func:`aborted_copy`), which a read_committed consumer must never see. Returns the
    number of aborted records. When it returns, every transaction's marker is on its
    partitions (:func:`wait_until_stable`), so a read_committed end offset covers the history.
    """
    producer = transactional_producer(
        settings,
        transactional_id=f"{settings.topic_prefix}history-{rng.random()}",
        client_id="history",
        tuning={"linger.ms": 5},
    )
    producer.init_transactions(30)
    aborted = 0
    i = 0
    txn = 0
    while i < len(history):
        txn += 1
        size = rng.randint(1, transaction_size)
        chunk = history[i : i + size]
        if abort_every and txn % abort_every == 0:
            producer.begin_transaction()
            for n, event in enumerate(chunk):
                junk = aborted_copy(event, n)
                producer.produce(
                    settings.topic_named(junk.topic),
                    key=junk.key.encode(),
                    value=encode(junk.record),
                )
                aborted += 1
            producer.flush(30)
            producer.abort_transaction(30)
        producer.begin_transaction()
        for event in chunk:
            producer.produce(
                settings.topic_named(event.topic),
                key=event.key.encode(),
                value=encode(event.record),
            )
        producer.commit_transaction(30)
        i += size
    wait_until_stable(settings, {settings.topic_named(e.topic) for e in history})
    return aborted


def cleanup(settings: Settings) -> None:
    """Drop the test's schemas (live, rebuild, old, any extra) and delete its topics."""
    from projections.db import connect, schema_name

    base = schema_name(settings.topic_prefix)
    with connect(settings.pg_dsn, autocommit=True) as conn:
        names = conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname = %s OR nspname LIKE %s",
            (base, base.replace("_", r"\_") + r"\_\_%"),
        ).fetchall()
        for (name,) in names:
            conn.execute(
                psycopg_sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                    psycopg_sql.Identifier(name)
                )
            )
    admin = admin_client(settings)
    prefix = settings.topic_prefix
    topics = [t for t in admin.list_topics(timeout=10).topics if t.startswith(prefix)]
    if topics:
        for future in admin.delete_topics(topics, operation_timeout=30).values():
            with contextlib.suppress(Exception):
                future.result()


def schema_differences(settings: Settings, left: str, right: str) -> list[str]:
    """How two projection schemas differ, row by row, as ``projections rebuild --verify``
    describes it (empty: the same rows)."""
    from projections.compare import compare_schemas
    from projections.db import connect

    with connect(settings.pg_dsn, autocommit=True) as conn:
        return [d.describe() for d in compare_schemas(conn, left, right)]


@contextlib.contextmanager
def fresh_topics(partitions: int) -> Iterator[Settings]:
    """Every catalogue topic created under a unique prefix; afterwards :func:`cleanup`."""
    settings = unique_settings(partitions=partitions)
    ensure_topics(settings)
    try:
        yield settings
    finally:
        cleanup(settings)


def table_rows(conn: Any, schema: str, table: str, key: Sequence[str]) -> list[dict[str, Any]]:
    """Every row of ``schema.table`` as dicts, ordered by ``key``."""
    from psycopg.rows import dict_row

    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(
            psycopg_sql.SQL("SELECT * FROM {} ORDER BY {}").format(
                psycopg_sql.Identifier(schema, table),
                psycopg_sql.SQL(", ").join(psycopg_sql.Identifier(k) for k in key),
            )
        )
        return list(cur.fetchall())


def terminate_projector_backends(settings: Settings, schema: str) -> int:
    """Terminate (server side) every PostgreSQL connection of a projector of ``schema``; how
    many there were."""
    from projections.db import connect

    with connect(settings.pg_dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (f"sluicegate-projector:{schema}"[:63],),
        ).fetchall()
    return len(rows)
