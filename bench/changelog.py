"""Admission changelogs built fast, for the recovery section: records in the changelog's format.

:func:`admission_records` yields what the processor writes for an admitted delivery: the
occurrence's state (``s/<admission key>``, a real state encoded by the real codec, decided by
the real core for the example workflow) and its timer (``t/<due>/<admission key>``), one
admission key per pair. :func:`produce_changelog` writes them to one changelog partition with
an idempotent producer (not in transactions: a read_committed restore reads them alike, and
building is not what is measured).
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator

from confluent_kafka import Producer

from bench.backlog import WORKFLOW_FILE, candle
from streams.core import admission
from streams.core.admission import Admit
from streams.core.errors import Refusal
from streams.core.intake import intake
from streams.core.state_codec import encode_state
from streams.core.workflow import parse_workflow_file, revise
from streams.engine.store import state_key, timer_key
from streams.settings import Settings

NOW_MS = 1_796_040_120_000


def sample_state() -> tuple[str, bytes, int]:
    """(admission key, encoded state, next due ms) of one admitted delivery."""
    (definition,) = parse_workflow_file(tomllib.loads(WORKFLOW_FILE.read_text()))
    workflow = revise(None, definition, NOW_MS)
    assert workflow is not None
    delivery = intake(
        candle(None),
        workflow,
        delivery_id="bench-delivery",
        received_at_ms=NOW_MS,
        channel="publish",
        now_ms=NOW_MS,
    )
    assert not isinstance(delivery, Refusal), delivery
    state = None
    for event in admission.decide(None, Admit(delivery, workflow), NOW_MS):
        state = admission.evolve(state, event)
    assert state is not None
    due = admission.next_due_ms(state)
    assert due is not None
    return delivery.admission_key, encode_state(state), due


FAR_FUTURE_MS = 10 * 365 * 86_400_000


def admission_records(
    count: int, tag: str = "", *, far_future: bool = False
) -> Iterator[tuple[bytes, bytes | None]]:
    """``count`` changelog records: state and timer of ``count // 2`` admission keys
    (``far_future``: timers ten years later, so that a processor holding them fires none)."""
    key, value, due = sample_state()
    if far_future:
        due += FAR_FUTURE_MS
    for n in range(count):
        occurrence = f"{key}#{tag}{n // 2}"
        if n % 2 == 0:
            yield state_key(occurrence).encode(), value
        else:
            yield timer_key(due, occurrence).encode(), b""


def producer(settings: Settings) -> Producer:
    return Producer(
        settings.producer_config(
            **{
                "enable.idempotence": True,
                "linger.ms": 50,
                "batch.size": 1_000_000,
                "compression.type": "lz4",
            }
        )
    )


def produce_changelog(
    settings: Settings, topic: str, partition: int, records: Iterator[tuple[bytes, bytes | None]]
) -> int:
    """Write ``records`` to ``topic[partition]``; the number written."""
    out = producer(settings)
    written = 0
    for key, value in records:
        while True:
            try:
                out.produce(topic, key=key, value=value, partition=partition)
                break
            except BufferError:
                out.poll(0.05)
        written += 1
    if out.flush(120) != 0:
        raise RuntimeError(f"{topic}[{partition}]: records left unacknowledged")
    return written
