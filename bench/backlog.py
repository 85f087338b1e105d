"""The admission benchmark's records and topics: one planned backlog, replayed per run.

:func:`plan` makes ``total`` deliveries of the README's example candle to the example
workflow (``examples/btc-breakout.toml``: one destination, three slots; its branch timeout
raised to an hour, as no worker completes the branches), a ``duplicates``
share of them repeating an earlier occurrence. They are encoded once (:class:`Backlog`), so
every contender of every run reads byte-identical records. :class:`Stage` is one run's
private world: a fresh topic prefix and state directory, the workflow published, the backlog
produced; :meth:`Stage.close` deletes its topics (the broker is shared); :func:`remove_stale_stages`
deletes what runs killed before that left behind.
"""

from __future__ import annotations

import contextlib
import dataclasses
import marshal
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import tomllib
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from schemas.codec import encode
from schemas.events import DeliveryDeduplicated, DeliveryRejected, OccurrenceConflict, RunAdmitted
from schemas.registry import get_registry
from schemas.topics import DELIVERIES, RUNS, WORKFLOWS
from streams.core.errors import Refusal
from streams.core.intake import intake
from streams.core.workflow import parse_workflow_file, revise, workflow_key
from streams.kafka.clients import uncommitted_consumer
from streams.kafka.offsets import watermarks
from streams.kafka.topics import ensure_topics
from streams.settings import Settings, load_settings

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW_FILE = ROOT / "examples" / "btc-breakout.toml"


def received_at_ms(now_ms: int | None = None) -> int:
    """When planned deliveries are received: a second past the start of the current minute
    (UTC), a second after the candle of :func:`candle` closed.

    Taken from the clock, not fixed: the processors judge the deliveries by their own clock,
    and a backlog planned at a fixed date (2026-11-30T12:01:01Z until 2026-12-07) became
    ``beyond_horizon`` as a whole once the example workflow's 7-day retention had passed.
    """
    now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    return now - now % 60_000 + 1_000


def candle_open(received_ms: int) -> str:
    """The open (RFC 3339) of the 1-minute candle that closed a second before ``received_ms``."""
    opened = (received_ms - 61_000) // 1000
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(opened))


BRANCH_TIMEOUT = "1h"
OUTCOME_HEADERS = frozenset(
    get_registry().by_class[cls].header
    for cls in (RunAdmitted, DeliveryDeduplicated, OccurrenceConflict, DeliveryRejected)
)
HEADER_LENGTH = len(next(iter(OUTCOME_HEADERS)))


@dataclass(frozen=True)
class Delivery:
    key: bytes
    value: bytes
    delivery_id: str
    admission_key: str


@dataclass(frozen=True)
class Backlog:
    deliveries: list[Delivery]
    workflow_key: bytes
    workflow_value: bytes
    slots: tuple[str, ...]

    @property
    def occurrences(self) -> int:
        return len({d.admission_key for d in self.deliveries})

    def first(self, count: int) -> Backlog:
        """The first ``count`` deliveries, for the same workflow (repeats are spread evenly
        through a backlog, so a prefix has about the same share of them)."""
        return dataclasses.replace(self, deliveries=self.deliveries[:count])

    def save(self, path: Path) -> None:
        """Write the backlog to ``path`` for another benchmark process (:meth:`load`):
        reading it back takes a fraction of a second, planning it again about 6 s."""
        rows = [(d.key, d.value, d.delivery_id, d.admission_key) for d in self.deliveries]
        path.write_bytes(marshal.dumps((rows, self.workflow_key, self.workflow_value, self.slots)))

    @classmethod
    def load(cls, path: Path) -> Backlog:
        """The backlog :meth:`save` wrote to ``path`` (a file of this benchmark's own)."""
        rows, workflow_key, workflow_value, slots = marshal.loads(path.read_bytes())
        return cls([Delivery(*row) for row in rows], workflow_key, workflow_value, tuple(slots))


@dataclass(frozen=True)
class _Planned(Delivery):
    admission_key_source: str


def plan(
    total: int, duplicates: float, seed: int = 12, tag: str = "", now_ms: int | None = None
) -> Backlog:
    """``total`` encoded deliveries, ``duplicates`` of them repeats of earlier occurrences;
    ``tag`` goes into every event and delivery id, so that backlogs of different tags share
    no occurrence. They are received at :func:`received_at_ms` of ``now_ms`` (the clock's
    when ``None``)."""
    received = received_at_ms(now_ms)
    document = tomllib.loads(WORKFLOW_FILE.read_text())
    # Nobody completes the branches here: a timeout inside the run would add relaunches
    # (timers, BranchRelaunched) to what is measured as admission.
    document["workflow"][0]["branch_timeout"] = BRANCH_TIMEOUT
    (definition,) = parse_workflow_file(document)
    workflow = revise(None, definition, received - 60_000)
    assert workflow is not None
    rng = random.Random(seed)
    distinct = round(total * (1 - duplicates))
    sent: list[_Planned] = []
    out: list[_Planned] = []
    fresh = 0
    for n in range(total):
        repeat = sent and (fresh >= distinct or rng.random() < duplicates)
        if repeat:
            body = candle(rng.choice(sent).admission_key_source, received)
        else:
            body = candle(f"evt-{tag}{fresh:07d}", received)
            fresh += 1
        taken = intake(
            body,
            workflow,
            delivery_id=f"d-{tag}{n:07d}",
            received_at_ms=received,
            channel="publish",
            now_ms=received,
        )
        if isinstance(taken, Refusal):
            raise RuntimeError(f"the example workflow refused a planned delivery: {taken}")
        d = _Planned(
            taken.admission_key.encode(),
            encode(taken),
            taken.delivery_id,
            taken.admission_key,
            str(body["event_id"]),
        )
        if not repeat:
            sent.append(d)
        out.append(d)
    return Backlog(
        deliveries=[Delivery(d.key, d.value, d.delivery_id, d.admission_key) for d in out],
        workflow_key=workflow_key(workflow.subscription, workflow.environment).encode(),
        workflow_value=encode(workflow),
        slots=tuple(definition.slots),
    )


def candle(event_id: str | None, received_ms: int | None = None) -> dict[str, object]:
    """A breakout signal for the example workflow, of the candle that closed a second before
    ``received_ms`` (:func:`received_at_ms` of now when ``None``); without ``event_id`` its
    identity is derived from the candle's fields."""
    body: dict[str, object] = {} if event_id is None else {"event_id": event_id}
    body.update(
        source="tradingview",
        venue="binance",
        instrument="BTCUSDT",
        interval="1m",
        candle_open=candle_open(received_at_ms() if received_ms is None else received_ms),
        rule="breakout-v1",
        side="buy",
        price="97000.5",
        account="acc-1",
    )
    return body


def stop_on_sigterm() -> None:
    """Let SIGTERM unwind like Ctrl-C, so a stopped benchmark still deletes its topics and
    stops its child processes."""

    def stop(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)


STAGE_TOPIC = re.compile(r"bench-[0-9a-f]{10}\.")
"""How every topic a :class:`Stage` creates begins."""
STATE_ROOT = ROOT / "var" / "bench-state"


def new_stage_prefix() -> str:
    """A fresh stage's topic prefix (matches :data:`STAGE_TOPIC`)."""
    return f"bench-{uuid.uuid4().hex[:10]}."


def stale_stage_topics(names: Iterable[str]) -> list[str]:
    """The topics among ``names`` that a :class:`Stage` made (sorted)."""
    return sorted(n for n in names if STAGE_TOPIC.match(n))


def remove_stale_stages(settings: Settings) -> int:
    """Delete the topics and state directories of stages an interrupted run left behind
    (killed before :meth:`Stage.close`); the number of topics deleted. Call it only when no
    benchmark is running on this broker: it cannot tell a live stage from a stale one."""
    admin = AdminClient(settings.kafka_config())
    names = stale_stage_topics(admin.list_topics(timeout=10).topics)
    if names:
        for future in admin.delete_topics(names, operation_timeout=120).values():
            with contextlib.suppress(Exception):
                future.result()
    shutil.rmtree(STATE_ROOT, ignore_errors=True)
    return len(names)


def produce_backlog(settings: Settings, backlog: Backlog, topic: str | None = None) -> None:
    """The workflow, then every delivery to ``topic`` (default: the deployment's deliveries),
    acks=all and idempotent, all acknowledged."""
    producer = Producer(
        settings.producer_config(**{"enable.idempotence": True, "acks": "all", "linger.ms": 20})
    )
    producer.produce(
        settings.topic(WORKFLOWS), key=backlog.workflow_key, value=backlog.workflow_value
    )
    target = topic or settings.topic(DELIVERIES)
    for d in backlog.deliveries:
        while True:
            try:
                producer.produce(target, key=d.key, value=d.value)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120) != 0:
        raise RuntimeError("the backlog was not acknowledged within 120 s")


class Stage:
    """One run's fresh topics (prefix ``bench-<hex>.``), workflow and state directory."""

    def __init__(self, partitions: int) -> None:
        self.prefix = new_stage_prefix()
        self.state_dir = STATE_ROOT / self.prefix
        self.settings: Settings = load_settings(
            {
                "SLUICEGATE_TOPIC_PREFIX": self.prefix,
                "SLUICEGATE_PARTITIONS": str(partitions),
                "SLUICEGATE_STATE_DIR": str(self.state_dir),
            }
        )
        ensure_topics(self.settings)

    def env(self) -> dict[str, str]:
        """What a ``sluicegate`` child process needs to run on this stage."""
        return {
            "SLUICEGATE_TOPIC_PREFIX": self.prefix,
            "SLUICEGATE_PARTITIONS": str(self.settings.partitions),
            "SLUICEGATE_STATE_DIR": str(self.state_dir),
        }

    def produce(self, backlog: Backlog, topic: str | None = None) -> None:
        """The workflow, then every delivery (acks=all, idempotent), all acknowledged."""
        produce_backlog(self.settings, backlog, topic)

    def close(self) -> None:
        admin = AdminClient(self.settings.kafka_config())
        names = [n for n in admin.list_topics(timeout=10).topics if n.startswith(self.prefix)]
        if names:
            for future in admin.delete_topics(names, operation_timeout=60).values():
                with contextlib.suppress(Exception):
                    future.result()
        shutil.rmtree(self.state_dir, ignore_errors=True)


class OutcomeCounter:
    """Counts outcome records on ``runs`` as a read_committed consumer sees them, from a
    thread; :meth:`wait` returns the monotonic time at which the count reached ``expected``.

    Only the 10-byte schema header of each record is looked at, so the counter takes little
    of the CPU the measured processes need.
    """

    def __init__(self, settings: Settings, expected: int) -> None:
        self.expected = expected
        self.count = 0
        self.reached_at: float | None = None
        self._done = threading.Event()
        self._stop = threading.Event()
        self._consumer = Consumer(
            settings.kafka_config(
                **{
                    "group.id": f"bench-counter-{uuid.uuid4().hex}",
                    "isolation.level": "read_committed",
                    "enable.auto.commit": False,
                    "fetch.wait.max.ms": 10,
                }
            )
        )
        topic = settings.topic(RUNS)
        partitions = self._consumer.list_topics(topic, timeout=10).topics[topic].partitions
        self._consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        self._thread = threading.Thread(target=self._run, daemon=True, name="outcome-counter")
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                for m in self._consumer.consume(10_000, timeout=0.05):
                    err = m.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            continue
                        raise RuntimeError(err.str())
                    if (m.value() or b"")[:HEADER_LENGTH] in OUTCOME_HEADERS:
                        self.count += 1
                if self.count >= self.expected and self.reached_at is None:
                    self.reached_at = time.monotonic()
                    self._done.set()
        finally:
            self._consumer.close()

    def wait(self, timeout_s: float) -> float:
        if not self._done.wait(timeout_s):
            raise TimeoutError(f"{self.count} of {self.expected} outcomes after {timeout_s:.0f} s")
        assert self.reached_at is not None
        return self.reached_at

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)


def _high_watermarks(settings: Settings, topic: str, partitions: Iterable[int]) -> dict[int, int]:
    """The end of each partition of ``topic``, records of unfinished transactions included (a
    read_committed consumer is told the last stable offset instead, which stops before them)."""
    reader = uncommitted_consumer(settings, group_id=f"bench-ends-{uuid.uuid4().hex}")
    deadline = time.monotonic() + 10
    try:
        return {p: watermarks(reader, TopicPartition(topic, p), deadline)[1] for p in partitions}
    finally:
        reader.close()


def read_all(
    settings: Settings, topic: str, timeout_s: float = 120
) -> Iterator[tuple[int, bytes, bytes]]:
    """(partition, key, value) of every committed record of ``topic`` up to its end now.

    "Now" is each partition's high watermark when called, which counts the records of a
    transaction committed a moment ago although its commit markers may not be written yet
    (a read_committed consumer reaches its end at the last stable offset before them): a
    partition is read until its end is at or past that watermark, so such a transaction's
    records are waited for rather than missed. An empty partition is not read at all.
    """
    consumer = Consumer(
        settings.kafka_config(
            **{
                "group.id": f"bench-reader-{uuid.uuid4().hex}",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                # Once its prefetch queue was full, librdkafka postponed each refill by the
                # default 1 s although this loop drained it at once: 450,000 records took
                # 3.0 to 4.0 s to read, 1.4 s with these.
                "fetch.queue.backoff.ms": 10,
                "fetch.max.bytes": 100 << 20,
                "max.partition.fetch.bytes": 16 << 20,
                "queued.max.messages.kbytes": 256 << 10,
            }
        )
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = _high_watermarks(settings, topic, partitions)
        # An empty partition has nothing to wait for: its end-of-partition event alone took
        # about a second to arrive (10 s for the empty topics of an admission run).
        pending = {p for p, end in ends.items() if end != 0}
        consumer.assign([TopicPartition(topic, p, 0) for p in sorted(pending)])
        deadline = time.monotonic() + timeout_s
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic}: {sorted(pending)} not at their end")
            for m in consumer.consume(10_000, timeout=0.5):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        # Reported at the last stable offset: past the watermark only once
                        # every transaction in the log then has its marker.
                        at = TopicPartition(topic, m.partition() or 0)
                        if consumer.position([at])[0].offset >= ends[at.partition]:
                            pending.discard(at.partition)
                        continue
                    raise RuntimeError(err.str())
                yield (m.partition() or 0, m.key() or b"", m.value() or b"")
    finally:
        consumer.close()


def start_child(
    stage: Stage,
    name: str,
    args: list[str],
    env: Mapping[str, str] | None = None,
    *,
    module: str = "sluicegate.cli",
) -> subprocess.Popen[bytes]:
    """``sluicegate <args>`` (``python -m <module> <args>``) as a child process run from the
    repository, with the stage's environment (or ``env``), its output in
    ``var/bench-logs/<prefix><name>.log``."""
    logs = ROOT / "var" / "bench-logs"
    logs.mkdir(parents=True, exist_ok=True)
    with (logs / f"{stage.prefix}{name}.log").open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", module, *args],
            cwd=ROOT,
            env=dict(env) if env is not None else {**os.environ, **stage.env()},
            stdout=log,
            stderr=log,
        )


def stop_children(children: list[subprocess.Popen[bytes]], grace_s: float = 30.0) -> None:
    """SIGTERM every child, then wait for each; one still running after ``grace_s`` is
    killed."""
    for child in children:
        child.terminate()
    for child in children:
        try:
            child.wait(grace_s)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
