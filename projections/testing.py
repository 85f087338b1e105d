"""Consistent event histories for tests, benchmarks and demos of the projections.

:func:`build_history` simulates what the processor and the workers write for a number of
occurrences: workflow revisions, deliveries and their one outcome each, runs with branch
launches, worker reports (some sent twice) and the accepted copies, relaunches, status
changes, reruns and evictions. The result is in causal order; every event names the topic it
belongs on and its key (the admission key, or ``subscription/environment`` for workflows).
It is deterministic for a given ``random.Random`` state and never reads a clock.
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Producer
from psycopg import sql as psycopg_sql

from schemas.codec import encode
from schemas.commands import AdmitDelivery, AuthorizeRerun
from schemas.events import (
    AdmissionRecordEvicted,
    BranchCompleted,
    BranchFailed,
    BranchLaunched,
    BranchRelaunched,
    BranchSkipped,
    BranchStarted,
    DeliveryDeduplicated,
    DeliveryRejected,
    OccurrenceConflict,
    RerunRejected,
    RunAdmitted,
    RunStatusChanged,
    WorkflowRevised,
)
from schemas.records import Record
from streams.settings import Settings

BASE_MS = 1_780_000_000_000
SUBSCRIPTIONS = (("btc-breakout", "paper"), ("eth-revert", "live"))
REJECT_REASONS = ("beyond_horizon", "unknown_subscription", "missing_identity_fields")


@dataclass(frozen=True)
class Emitted:
    """One record and where it goes: short topic name and message key."""

    topic: str
    key: str
    record: Record


@dataclass
class _Clock:
    now: int = BASE_MS

    def tick(self, rng: random.Random) -> int:
        self.now += rng.randint(1, 50)
        return self.now


@dataclass
class _Run:
    run_id: str
    admission_key: str
    slots: tuple[str, ...]
    status: str = "pending"
    slot_done: dict[str, str] = field(default_factory=dict)
    slot_attempt: dict[str, int] = field(default_factory=dict)


def workflow(subscription: str, environment: str, revision: int, at_ms: int) -> WorkflowRevised:
    return WorkflowRevised(
        subscription=subscription,
        environment=environment,
        revision=revision,
        slots=("analysis", "signal", "journal"),
        branch_timeout_ms=30_000,
        retention_ms=7 * 86_400_000,
        identity_event_id_field="event_id",
        identity_derived_fields=("venue", "instrument", "interval", "candle_open", "rule"),
        immutable_fields=("side", "rule", "price"),
        validity_source_time="candle_close",
        validity_window_ms=5000,
        scope_fields=("account", "instrument", "side"),
        scope_sequence_field="candle_open",
        auth_token_env=None,
        auth_hmac_secret_env=None,
        definition_digest=f"digest-{subscription}-{revision}",
        applied_at_ms=at_ms,
    )


def build_history(rng: random.Random, occurrences: int, tag: str = "h") -> list[Emitted]:
    """A causal history of ``occurrences`` occurrences, interleaved at random.

    ``tag`` goes into every id, so histories built with different tags never collide.
    """
    clock = _Clock()
    out: list[Emitted] = []
    for sub, env in SUBSCRIPTIONS:
        out.append(Emitted("workflows", f"{sub}/{env}", workflow(sub, env, 1, clock.tick(rng))))
    # Each occurrence is a generator of its own events; interleaving them keeps causal order
    # within an occurrence while mixing occurrences (and so partitions and topics).
    streams = [_occurrence(rng, clock, tag, i) for i in range(occurrences)]
    if rng.random() < 0.5:
        sub, env = SUBSCRIPTIONS[0]
        out.append(Emitted("workflows", f"{sub}/{env}", workflow(sub, env, 2, clock.tick(rng))))
    while streams:
        stream = rng.choice(streams)
        step = next(stream, None)
        if step is None:
            streams.remove(stream)
        else:
            out.extend(step)
    return out


def _occurrence(rng: random.Random, clock: _Clock, tag: str, i: int) -> Iterator[list[Emitted]]:
    sub, env = rng.choice(SUBSCRIPTIONS)
    key = f"{sub}/{env}/{tag}-occ-{i}"
    slots = ("analysis", "signal", "journal")[: rng.randint(1, 3)]
    deliveries = rng.randint(1, 4)
    rejected = rng.random() < 0.1
    run: _Run | None = None
    for d in range(deliveries):
        delivery_id = f"{tag}-d-{i}-{d}"
        received = clock.tick(rng)
        yield [
            Emitted(
                "deliveries",
                key,
                AdmitDelivery(
                    delivery_id=delivery_id,
                    subscription=sub,
                    environment=env,
                    admission_key=key,
                    source="tradingview",
                    event_id=None if i % 2 else f"ev-{i}",
                    payload_json='{"price":"97000.5","side":"buy"}',
                    received_at_ms=received,
                    channel=rng.choice(("webhook", "publish")),
                ),
            )
        ]
        decided = clock.tick(rng)
        if rejected:
            yield [
                Emitted(
                    "runs",
                    key,
                    DeliveryRejected(
                        delivery_id=delivery_id,
                        admission_key=key,
                        subscription=sub,
                        environment=env,
                        reason=rng.choice(REJECT_REASONS),
                        detail="simulated",
                        received_at_ms=received,
                        decided_at_ms=decided,
                    ),
                )
            ]
            continue
        if run is None:
            run = _Run(f"{tag}-run-{i}-0", key, slots)
            yield _admit(
                run,
                sub=sub,
                env=env,
                delivery_id=delivery_id,
                at_ms=decided,
                rerun_number=0,
                rerun_of=None,
                rerun_reason=None,
            )
            continue
        if rng.random() < 0.15:
            yield [
                Emitted(
                    "runs",
                    key,
                    OccurrenceConflict(
                        delivery_id=delivery_id,
                        admission_key=key,
                        run_id=run.run_id,
                        original_digest="digest-a",
                        conflicting_digest="digest-b",
                        differing_fields=("price",),
                        received_at_ms=received,
                        decided_at_ms=decided,
                    ),
                )
            ]
        else:
            reason = "in_flight" if run.status in ("pending", "running") else run.status
            yield [
                Emitted(
                    "runs",
                    key,
                    DeliveryDeduplicated(
                        delivery_id=delivery_id,
                        admission_key=key,
                        run_id=run.run_id,
                        reason=reason,
                        received_at_ms=received,
                        decided_at_ms=decided,
                    ),
                )
            ]
        # Some branch work happens between deliveries.
        yield from _branch_work(rng, clock, run, partial=True)
    if run is None:
        return
    yield from _branch_work(rng, clock, run, partial=False)
    if rng.random() < 0.2:
        request_id = f"{tag}-rq-{i}"
        yield [
            Emitted(
                "deliveries",
                key,
                AuthorizeRerun(
                    request_id=request_id,
                    admission_key=key,
                    run_id=run.run_id,
                    reason="operator asked",
                    requested_by="tester",
                    requested_at_ms=clock.tick(rng),
                ),
            )
        ]
        if rng.random() < 0.3:
            yield [
                Emitted(
                    "runs",
                    key,
                    RerunRejected(
                        request_id=request_id,
                        admission_key=key,
                        run_id=run.run_id,
                        reason="duplicate_request",
                        decided_at_ms=clock.tick(rng),
                    ),
                )
            ]
        else:
            rerun = _Run(f"{tag}-run-{i}-1", key, slots)
            yield _admit(
                rerun,
                sub=sub,
                env=env,
                delivery_id=request_id,
                at_ms=clock.tick(rng),
                rerun_number=1,
                rerun_of=run.run_id,
                rerun_reason="operator asked",
            )
            yield from _branch_work(rng, clock, rerun, partial=False)
            run = rerun
    if rng.random() < 0.1:
        run_ids = (f"{tag}-run-{i}-0",) + ((run.run_id,) if run.run_id.endswith("-1") else ())
        yield [
            Emitted(
                "runs",
                key,
                AdmissionRecordEvicted(
                    admission_key=key, run_ids=run_ids, evicted_at_ms=clock.tick(rng)
                ),
            )
        ]


def _admit(
    run: _Run,
    *,
    sub: str,
    env: str,
    delivery_id: str,
    at_ms: int,
    rerun_number: int,
    rerun_of: str | None,
    rerun_reason: str | None,
) -> list[Emitted]:
    admitted = RunAdmitted(
        run_id=run.run_id,
        admission_key=run.admission_key,
        delivery_id=delivery_id,
        subscription=sub,
        environment=env,
        workflow_revision=1,
        source="tradingview",
        event_id=None,
        content_digest="digest-a",
        source_time_ms=at_ms - 2000,
        expires_at_ms=at_ms + 3000,
        validity_source_time="candle_close",
        validity_window_ms=5000,
        slots=run.slots,
        scope_key="acc-1/BTCUSDT/buy",
        sequence="2026-11-30T12:00:00Z",
        payload_json='{"price":"97000.5","side":"buy"}',
        rerun_number=rerun_number,
        rerun_of=rerun_of,
        rerun_reason=rerun_reason,
        admitted_at_ms=at_ms,
    )
    out = [Emitted("runs", run.admission_key, admitted)]
    for slot in run.slots:
        out.append(
            Emitted(
                "tasks",
                run.admission_key,
                BranchLaunched(
                    run_id=run.run_id,
                    admission_key=run.admission_key,
                    slot=slot,
                    attempt=1,
                    workflow_revision=1,
                    expires_at_ms=at_ms + 3000,
                    timeout_at_ms=at_ms + 30_000,
                    payload_json=admitted.payload_json,
                    launched_at_ms=at_ms,
                ),
            )
        )
    return out


def _status(run: _Run, status: str, at_ms: int) -> list[Emitted]:
    if status == run.status:
        return []
    event = RunStatusChanged(
        run_id=run.run_id,
        admission_key=run.admission_key,
        previous_status=run.status,
        status=status,
        changed_at_ms=at_ms,
    )
    run.status = status
    return [Emitted("runs", run.admission_key, event)]


def _branch_work(
    rng: random.Random, clock: _Clock, run: _Run, *, partial: bool
) -> Iterator[list[Emitted]]:
    for slot in run.slots:
        if slot in run.slot_done or (partial and rng.random() < 0.5):
            continue
        attempt = run.slot_attempt.get(slot, 1)
        if rng.random() < 0.2 and attempt < 3:
            # Timed out without a result: relaunched under the same run.
            started = BranchStarted(
                run.run_id, run.admission_key, slot, attempt, "w-1", clock.tick(rng)
            )
            yield [
                Emitted("branch-results", run.admission_key, started),
                Emitted("runs", run.admission_key, started),
                *_status(run, "running", started.started_at_ms),
            ]
            attempt += 1
            run.slot_attempt[slot] = attempt
            yield [
                Emitted(
                    "tasks",
                    run.admission_key,
                    BranchRelaunched(
                        run_id=run.run_id,
                        admission_key=run.admission_key,
                        slot=slot,
                        attempt=attempt,
                        workflow_revision=1,
                        expires_at_ms=clock.now + 3000,
                        timeout_at_ms=clock.now + 30_000,
                        payload_json="{}",
                        reason="branch_timeout",
                        relaunched_at_ms=clock.tick(rng),
                    ),
                )
            ]
            if rng.random() < 0.3:
                # The timed-out attempt's result arrives after all: it finishes the slot
                # (first result wins), and the relaunched attempt never reports.
                yield _finish(rng, clock, run, slot, attempt=attempt - 1, worker="w-1")
                continue
        if partial and rng.random() < 0.5:
            continue
        worker = f"w-{rng.randint(1, 3)}"
        started = BranchStarted(
            run.run_id, run.admission_key, slot, attempt, worker, clock.tick(rng)
        )
        yield [
            Emitted("branch-results", run.admission_key, started),
            Emitted("runs", run.admission_key, started),
            *_status(run, "running", started.started_at_ms),
        ]
        yield _finish(rng, clock, run, slot, attempt=attempt, worker=worker)


def _finish(
    rng: random.Random, clock: _Clock, run: _Run, slot: str, *, attempt: int, worker: str
) -> list[Emitted]:
    """A slot's terminal report (sometimes sent twice), its accepted copy, the run status."""
    roll = rng.random()
    at = clock.tick(rng)
    end: BranchCompleted | BranchFailed | BranchSkipped
    if roll < 0.7:
        end = BranchCompleted(
            run.run_id, run.admission_key, slot, attempt, worker, '{"ok":true}', at
        )
    elif roll < 0.85:
        end = BranchFailed(run.run_id, run.admission_key, slot, attempt, worker, "boom", at)
    else:
        reason = rng.choice(("expired_at_dequeue", "not_applicable"))
        end = BranchSkipped(run.run_id, run.admission_key, slot, attempt, worker, reason, at)
    reports = [Emitted("branch-results", run.admission_key, end)]
    if rng.random() < 0.2:
        reports.append(Emitted("branch-results", run.admission_key, end))  # resent
    run.slot_done[slot] = type(end).__name__
    final: list[Emitted] = []
    if len(run.slot_done) == len(run.slots):
        kinds = set(run.slot_done.values())
        status = (
            "failed"
            if "BranchFailed" in kinds
            else "completed"
            if "BranchCompleted" in kinds
            else "skipped"
        )
        final = _status(run, status, clock.tick(rng))
    return [*reports, Emitted("runs", run.admission_key, end), *final]


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
    number of aborted records.
    """
    producer = Producer(
        settings.producer_config(
            **{
                "transactional.id": f"{settings.topic_prefix}history-{rng.random()}",
                "linger.ms": 5,
            }
        )
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
    return aborted


def unique_settings(base: Settings | None = None) -> Settings:
    """Settings with a fresh topic prefix ``t-<8 hex>.``, so a test has its own everything."""
    from streams.settings import load_settings

    return dataclasses.replace(base or load_settings(), topic_prefix=f"t-{uuid.uuid4().hex[:8]}.")


def cleanup(settings: Settings) -> None:
    """Drop the test's schemas (live, rebuild, old, any extra) and delete its topics."""
    from confluent_kafka.admin import AdminClient

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
    admin = AdminClient(settings.kafka_config())
    prefix = settings.topic_prefix
    topics = [t for t in admin.list_topics(timeout=10).topics if t.startswith(prefix)]
    if topics:
        for future in admin.delete_topics(topics, operation_timeout=30).values():
            with contextlib.suppress(Exception):
                future.result()


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
