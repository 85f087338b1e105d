"""The Kafka clients of one processor instance: its transactional producer and its group
consumer, created with the engine's tuning and replaced in place.

Replacing them is how an instance recovers without exiting. The producer is replaced when
the broker fenced it for outliving its transaction timeout and when a transaction's outcome
is unknown; the consumer when the instance starts over. A replacement producer has the same
transactional id, so its ``init_transactions`` completes or aborts whatever transaction the
id still has open before anything new is written: nothing of the old one can follow it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable

from confluent_kafka import Consumer, KafkaException, Producer

from streams.engine import transactions as txn
from streams.errors import KafkaUnavailable
from streams.kafka.clients import read_committed_consumer, transactional_producer
from streams.settings import Settings

log = logging.getLogger("sluicegate.processor")

RENEW_RETRY_S = (1.0, 30.0)
"""A producer's ``init_transactions`` (the first one's, or a replacement's) is tried again
this long after the broker did not answer: the first pause, doubled each time up to the
second."""


class Clients:
    """The producer and the consumer in use. Read them from here each time: they are
    replaced in place."""

    def __init__(
        self,
        settings: Settings,
        *,
        name: str,
        instance_id: str,
        group: str,
        transaction_timeout_ms: int,
        commit_interval_ms: int,
        static_membership: bool,
    ) -> None:
        self._settings = settings
        self._who = f"{name}/{instance_id}"
        self._transactional_id = f"{settings.topic_prefix}{name}-{instance_id}"
        self._client_id = f"{name}-{instance_id}"
        self._group = group
        self._producer_tuning = {
            "transaction.timeout.ms": transaction_timeout_ms,
            # A transaction's records wait for its commit (which flushes them at once,
            # linger or not) unless deciding outlasts the interval: one produce request per
            # partition per transaction. At 5 ms, a partition's records left in several
            # requests: 54 requests per transaction at 1,000 posts/s instead of 37, and the
            # broker's request threads were the largest CPU user on the webhook's path.
            # librdkafka wants linger below message.timeout.ms, which the transaction
            # timeout caps.
            "linger.ms": min(max(commit_interval_ms, 5), transaction_timeout_ms // 2),
        }
        membership = {"group.instance.id": instance_id} if static_membership else {}
        self._consumer_tuning: dict[str, object] = {
            # Never move by itself: every assignment names its offsets, and a position out of
            # range is a gap the engine records before it goes on (gaps.py).
            "auto.offset.reset": "error",
            "partition.assignment.strategy": "range",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 1500,
            "max.poll.interval.ms": 300_000,
            **membership,
        }
        self.producer = self.new_producer()
        self.consumer = self.new_consumer()

    def new_producer(self) -> Producer:
        return transactional_producer(
            self._settings,
            transactional_id=self._transactional_id,
            client_id=self._client_id,
            tuning=self._producer_tuning,
        )

    def new_consumer(self) -> Consumer:
        return read_committed_consumer(
            self._settings,
            group_id=self._group,
            client_id=self._client_id,
            tuning=self._consumer_tuning,
        )

    def init_producer(self) -> None:
        """The current producer's ``init_transactions``: it completes or aborts whatever
        transaction this transactional id left open (a predecessor's).

        Raises like :meth:`replace_producer`; after :class:`~streams.errors.KafkaUnavailable`
        it may be called again on the same producer (librdkafka resumes the call).
        """
        try:
            self.producer.init_transactions(30)
        except KafkaException as e:
            raise txn.translate(e, self._who, "initialising transactions") from e

    def init_producer_once_answered(self, stop: threading.Event) -> bool:
        """:meth:`init_producer`, tried again until the broker answers; ``False`` if ``stop``
        was set first."""
        return _once_answered(self.init_producer, stop)

    def replace_producer(self) -> None:
        """A new producer with this transactional id in place of the current one, which can
        write nothing more (what it still queues is purged); its ``init_transactions``
        completes or aborts whatever transaction the id has open.

        Raises :class:`~streams.errors.KafkaUnavailable` when the broker did not answer (try
        again later), :class:`~streams.errors.ProcessorFenced` or
        :class:`~streams.errors.FatalKafkaError` when no retry can help.
        """
        with contextlib.suppress(KafkaException):
            self.producer.purge()
        self.producer = self.new_producer()
        self.init_producer()

    def replace_producer_once_answered(self, stop: threading.Event) -> bool:
        """:meth:`replace_producer`, tried again (:data:`RENEW_RETRY_S`) until the broker
        answers; ``False`` if ``stop`` was set first. A fence or a fatal error is raised
        (another live instance has this id, or the client cannot go on)."""
        return _once_answered(self.replace_producer, stop)

    def replace_consumer(self) -> None:
        """Close the consumer (leaving the group) and create a new one, not subscribed."""
        try:
            self.consumer.close()
        except KafkaException as e:
            log.debug("closing the consumer: %s", e.args[0].str())
        self.consumer = self.new_consumer()


def _once_answered(attempt: Callable[[], None], stop: threading.Event) -> bool:
    """``attempt()`` until it does not raise :class:`~streams.errors.KafkaUnavailable`
    (:data:`RENEW_RETRY_S` apart); ``False`` if ``stop`` was set first."""
    pause_s = RENEW_RETRY_S[0]
    while True:
        try:
            attempt()
            return True
        except KafkaUnavailable as e:
            log.warning("%s; trying again", e)
        if stop.wait(pause_s):
            return False
        pause_s = min(pause_s * 2, RENEW_RETRY_S[1])
