"""Tail consumers that note when each record of interest becomes visible (read_committed)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, TopicPartition

from bench.backlog import Stage
from schemas.codec import decode
from schemas.registry import get_registry


@dataclass
class Arrivals:
    """What a tail consumer saw: id -> monotonic arrival time."""

    seen: dict[str, float] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)


def tail(consumer: Consumer, arrivals: Arrivals, key_of: Callable[[bytes], str | None]) -> None:
    """Poll ``consumer`` until ``arrivals.stop``; ``key_of(value)`` names a record or None."""
    try:
        while not arrivals.stop.is_set():
            # poll, not consume(n, timeout): a batch call waits out its timeout unless n
            # records arrive, which added up to 50 ms to every latency measured at low rates.
            m = consumer.poll(0.05)
            if m is None:
                continue
            now = time.monotonic()
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    continue
                raise RuntimeError(err.str())
            name = key_of(m.value() or b"")
            if name is not None:
                arrivals.seen[name] = now
    finally:
        consumer.close()


def tail_consumer(stage: Stage, topic: str) -> Consumer:
    consumer = Consumer(
        stage.settings.kafka_config(
            **{
                "group.id": f"bench-latency-{uuid.uuid4().hex}",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                # A fetch returns as soon as a record (or a commit marker advancing the
                # last stable offset) arrives, so a longer wait adds no latency; 5 ms made
                # this consumer alone cost the idle broker 0.08 cores, taken from the
                # processes being measured (measured: same p50 and p99 at 100 ms).
                "fetch.wait.max.ms": 100,
                "fetch.min.bytes": 1,
            }
        )
    )
    partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    # From the end: only what this measurement sends is timed.
    assigned = []
    for p in partitions:
        _low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
        assigned.append(TopicPartition(topic, p, high))
    consumer.assign(assigned)
    return consumer


def settle(arrivals: Arrivals, wanted: set[str], timeout_s: float) -> None:
    """Wait until every wanted id arrived or ``timeout_s`` passed (missing ones are counted)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not wanted <= arrivals.seen.keys():
        time.sleep(0.05)


def behind_s(arrivals: Arrivals, ids: set[str], last_scheduled: float) -> float:
    """How long after the last scheduled send the last of ``ids`` became visible: what a
    rate that was kept up with shows as about one latency, and a rate that was not as the
    backlog it left (every id missing: infinity)."""
    seen = [arrivals.seen[i] for i in ids if i in arrivals.seen]
    return max(seen) - last_scheduled if seen else float("inf")


def latencies_ms(arrivals: Arrivals, ids: list[str], scheduled: list[float]) -> list[float]:
    """Sorted milliseconds from each id's scheduled send to its arrival (arrived ids only)."""
    return sorted(
        (arrivals.seen[i] - at) * 1000
        for i, at in zip(ids, scheduled, strict=True)
        if i in arrivals.seen
    )


def id_reader(cls: type, name: str) -> Callable[[bytes], str | None]:
    """For :func:`tail`: a message's field ``name`` when it is a ``cls`` record, else ``None``
    (other types are skipped by their header, without decoding)."""
    header = get_registry().by_class[cls].header

    def read(value: bytes) -> str | None:
        if value[: len(header)] != header:
            return None
        found = getattr(decode(value), name)
        assert isinstance(found, str)
        return found

    return read
