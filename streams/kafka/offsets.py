"""Reading a partition's watermarks while its leader is being elected or moved.

A topic created a moment ago, or a partition whose leader is moving, answers ListOffsets
with ``NOT_LEADER_FOR_PARTITION``, ``LEADER_NOT_AVAILABLE`` or a leader epoch its metadata
does not know yet for a short while; librdkafka
does not flag those as retriable on this call, so :func:`watermarks` names them and waits
them out. Any other error, or the same ones past the deadline, is raised unchanged.
"""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

NOT_READY = frozenset(
    {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
        # A broker whose metadata lags the controller's (a topic deleted and created again a
        # moment ago, a leader moving) answers with the leader epoch it knows.
        KafkaError.UNKNOWN_LEADER_EPOCH,
        KafkaError.FENCED_LEADER_EPOCH,
    }
)
"""Codes a healthy cluster answers while a partition's leader is not known yet."""

RETRY_PAUSE_S = 0.1


def transient(error: KafkaError) -> bool:
    """True if ``error`` goes away by itself once a leader is known (and is not fatal)."""
    return not error.fatal() and (error.retriable() or error.code() in NOT_READY)


def watermarks(consumer: Consumer, tp: TopicPartition, deadline: float) -> tuple[int, int]:
    """The (low, high) watermarks of ``tp`` read from its leader (never cached).

    Transient errors are retried until ``deadline`` (a ``time.monotonic()`` value); then,
    or at once for any other error, the last ``KafkaException`` is raised.
    """
    while True:
        remaining = deadline - time.monotonic()
        try:
            low, high = consumer.get_watermark_offsets(
                tp, timeout=max(min(remaining, 30.0), 0.5), cached=False
            )
            return int(low), int(high)
        except KafkaException as e:
            if not transient(e.args[0]) or time.monotonic() + RETRY_PAUSE_S > deadline:
                raise
            time.sleep(RETRY_PAUSE_S)
