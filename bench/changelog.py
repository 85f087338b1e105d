"""Admission changelogs built fast, for the recovery section: records as the processor writes them.

:func:`admission_records` yields what the processor writes for an admitted delivery: the
occurrence's state (``s/<admission key>``, a real state encoded by the real codec, decided by
the real core for the example workflow) and its timer (``t/<due>/<admission key>``), one
admission key per pair. The states are :data:`DISTINCT_STATES` different occurrences in turn
(distinct ids, digests and payloads, so RocksDB's block compression meets what it meets in a
real store, not one value repeated). :func:`produce_changelog` writes them to one changelog
partition the way the processor's transactional producer does: uncompressed (it sets no
``compression.type``), in transactions of :data:`RECORDS_PER_TRANSACTION` records, each
ending in a commit marker that a restore reads past.

A changelog of one repeated state, compressed with LZ4 (how this section built it before),
is about 30 times smaller on the broker than the processor's (16 MB against about 480 MB for
1,000,000 records): a restore of it measured the decompression of a few fetches, not the
reading of a real changelog, and hid a one-second pause per refill of the prefetch queue
(``streams/engine/restore.py``, ``fetch.queue.backoff.ms``).
"""

from __future__ import annotations

import tomllib
import uuid
from collections.abc import Iterator

from confluent_kafka import Producer

from bench.backlog import WORKFLOW_FILE, candle, received_at_ms
from streams.core import admission
from streams.core.admission import Admit
from streams.core.errors import Refusal
from streams.core.intake import intake
from streams.core.state_codec import encode_state
from streams.core.workflow import parse_workflow_file, revise
from streams.engine.store import state_key, timer_key
from streams.kafka.clients import transactional_producer
from streams.settings import Settings

DISTINCT_STATES = 1024
"""Occurrences whose states the changelog's records take in turn."""
RECORDS_PER_TRANSACTION = 1000
"""About what one processor transaction writes to a changelog partition under a backlog (a
batch of up to 2,000 deliveries, of which the first copies write a state and a timer)."""


def sample_states(count: int) -> list[tuple[str, bytes, int]]:
    """(admission key, encoded state, next due ms) of ``count`` distinct admitted deliveries."""
    (definition,) = parse_workflow_file(tomllib.loads(WORKFLOW_FILE.read_text()))
    now = received_at_ms()  # within the retention horizon of the processor that restores them
    workflow = revise(None, definition, now)
    assert workflow is not None
    sampled: list[tuple[str, bytes, int]] = []
    for n in range(count):
        delivery = intake(
            candle(f"bench-{n:05d}", now),
            workflow,
            delivery_id=f"bench-delivery-{n:05d}",
            received_at_ms=now,
            channel="publish",
            now_ms=now,
        )
        assert not isinstance(delivery, Refusal), delivery
        state = None
        for event in admission.decide(None, Admit(delivery, workflow), now):
            state = admission.evolve(state, event)
        assert state is not None
        due = admission.next_due_ms(state)
        assert due is not None
        sampled.append((delivery.admission_key, encode_state(state), due))
    return sampled


def sample_state() -> tuple[str, bytes, int]:
    """(admission key, encoded state, next due ms) of one admitted delivery."""
    return sample_states(1)[0]


FAR_FUTURE_MS = 10 * 365 * 86_400_000


def admission_records(
    count: int, tag: str = "", *, far_future: bool = False
) -> Iterator[tuple[bytes, bytes | None]]:
    """``count`` changelog records: state and timer of ``count // 2`` admission keys
    (``far_future``: timers ten years later, so that a processor holding them fires none)."""
    later = FAR_FUTURE_MS if far_future else 0
    states = [
        (key, value, due + later)
        for key, value, due in sample_states(min(DISTINCT_STATES, max(1, count // 2)))
    ]
    for n in range(count):
        key, value, due = states[(n // 2) % len(states)]
        occurrence = f"{key}#{tag}{n // 2}"
        if n % 2 == 0:
            yield state_key(occurrence).encode(), value
        else:
            yield timer_key(due, occurrence).encode(), b""


def producer(settings: Settings) -> Producer:
    """A transactional producer configured as the processor's is for what matters here
    (no compression; its own id, so nothing fences a processor)."""
    return transactional_producer(
        settings,
        transactional_id=f"{settings.topic_prefix}bench-changelog-{uuid.uuid4().hex[:8]}",
        client_id="bench-changelog",
        tuning={"linger.ms": 100},
    )


def produce_changelog(
    settings: Settings, topic: str, partition: int, records: Iterator[tuple[bytes, bytes | None]]
) -> int:
    """Write ``records`` to ``topic[partition]`` in committed transactions of
    :data:`RECORDS_PER_TRANSACTION`; the number written."""
    out = producer(settings)
    out.init_transactions(30)
    written = 0
    for key, value in records:
        if written % RECORDS_PER_TRANSACTION == 0:
            if written:
                out.commit_transaction(60)
            out.begin_transaction()
        while True:
            try:
                out.produce(topic, key=key, value=value, partition=partition)
                break
            except BufferError:
                out.poll(0.05)
        written += 1
    if written:
        out.commit_transaction(60)
    return written
