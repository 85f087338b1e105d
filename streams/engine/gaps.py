"""Input records that left their topic before the instance read them: a decided gap.

The input topics keep records for a time (14 days for deliveries); an instance stopped,
frozen or behind for longer finds the records from its position on deleted, and an
operator's ``DeleteRecords`` or a topic deleted and created again does the same at once. A
consumer left to ``auto.offset.reset=earliest`` jumps to the partition's new start by
itself: the records in between are never decided and nothing says so.

The engine's consumer never moves by itself (``auto.offset.reset=error``, ``clients.py``;
every assignment names its offsets, ``assignment.py``). A position out of range stops the
partition's fetching with ``_AUTO_OFFSET_RESET`` (a :class:`~streams.engine.batch.Stopped`
item), and :func:`resume` decides where it goes on:

- behind the partition's start (retention, DeleteRecords): at the start; the records in
  between are an :class:`~streams.engine.batch.Expired` item, decided like a record: a dead
  letter (headers ``sluicegate.reason``, ``sluicegate.origin`` = ``topic[p]@first..last``)
  committed in the same transaction as the group's offset past them. An abort rewinds to the
  committed offset, which is out of range again, so the gap is found again: recorded once,
  never lost;
- beyond the partition's end (the topic deleted and created again, or truncated): at its
  start, so nothing written to it since is skipped; a dead letter records the move;
- in range again by the time the broker is asked: where it was.

A topic created again and grown past the old position is not out of range: its offsets
cannot tell. Its new topic id does: an assignment does not resume at a position read in
another topic, and a batch that finds an id changed while the partitions are held is not
committed (``positions.py``, ``assignment.py``). Operators: the dead letters say which
records went; their triggers are past any deadline by then, so send again whatever must
still run.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from confluent_kafka import Consumer, KafkaException, TopicPartition

from streams.engine.batch import Expired, Stopped
from streams.errors import TransactionUnresolved

log = logging.getLogger("sluicegate.processor")

_ATTEMPTS = 5

T = TypeVar("T")


def resume_stopped(
    consumer: Consumer, stopped: Sequence[Stopped], positions: Mapping[tuple[str, int], int]
) -> list[Expired]:
    """The gaps of the ``stopped`` partitions, and the consumer assigned again so that every
    held partition goes on: a stopped one where :func:`resume` says, the others at their
    ``positions`` (every held partition's, after the batch's records).

    librdkafka refuses to seek a partition it stopped (``Local: Erroneous state``); assigning
    it again is the only way on. Raises :class:`~streams.errors.TransactionUnresolved` when
    the broker does not answer: the instance starts over, and its assignment finds the
    partition out of range again."""
    gaps: list[Expired] = []
    goes_on: dict[tuple[str, int], int] = {}
    for topic, partition in stopped:
        tp = (topic, partition)
        if tp not in positions or tp in goes_on:
            continue  # not held (a callback raced the batch), or reported twice
        goes_on[tp], gap = resume(consumer, topic, partition, positions[tp])
        if gap is not None:
            gaps.append(gap)
    at = {**positions, **goes_on}
    starts = [TopicPartition(t, p, o) for (t, p), o in sorted(at.items())]
    _retried(lambda: consumer.assign(starts), "assigning the stopped partitions again")
    return gaps


def resume(
    consumer: Consumer, topic: str, partition: int, position: int
) -> tuple[int, Expired | None]:
    """Where ``topic[partition]``, stopped out of range at ``position``, goes on (see the
    module), and the gap to decide (``None`` when it is in range again)."""
    low, high = _retried(
        lambda: consumer.get_watermark_offsets(
            TopicPartition(topic, partition), timeout=10, cached=False
        ),
        f"reading the offsets of {topic}[{partition}]",
    )
    if low <= position <= high:
        log.warning("%s[%d]: position %d was out of range, now is not", topic, partition, position)
        return position, None
    if position < low:
        reason = (
            f"left retention unread: offsets {position} to {low - 1} ({low - position}), "
            "deleted before this instance read them (retention.ms, retention.bytes or "
            "DeleteRecords); the records among them were never decided"
        )
    else:
        reason = (
            f"position {position} lies beyond the partition's end {high} (the topic was "
            f"deleted and created again, or truncated); read again from its start {low}"
        )
    gap = Expired(topic, partition, position, low, reason)
    log.error("%s: %s", gap.origin(), reason)
    return low, gap


def _retried(attempt: Callable[[], T], what: str) -> T:
    """``attempt()``, tried again a few times (the broker may be electing a leader);
    :class:`~streams.errors.TransactionUnresolved` if it keeps failing."""
    for n in range(_ATTEMPTS):
        try:
            return attempt()
        except KafkaException as e:
            if n == _ATTEMPTS - 1:
                raise TransactionUnresolved(f"{what}: {e.args[0].str()}") from e
            time.sleep(0.05 * 2**n)
    raise AssertionError("unreachable")
