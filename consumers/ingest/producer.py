"""An asyncio face on one confluent-kafka producer for the ``deliveries`` topic.

librdkafka reports acknowledgements only from ``poll()``. A background thread polls, and the
delivery reports one ``poll()`` served settle their asyncio futures on the event loop in one
``loop.call_soon_threadsafe`` (futures are not thread-safe; one wake-up of the loop per poll
instead of one per delivery). ``produce()`` itself is called on the event loop thread: it
only enqueues, and librdkafka's queueing is thread-safe.

Guarantee of :meth:`AsyncDeliveryProducer.send`: when it returns, the delivery was
acknowledged by all in-sync replicas through the idempotent producer of
:func:`streams.adapters.deliveries.delivery_producer` (no duplicate from producer retries). When it
raises :class:`~consumers.ingest.errors.BrokerUnavailable`, the delivery was *not confirmed*:
it may still be written later (a queued message cannot be recalled), which is harmless
because the sender's retry is deduplicated by admission.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time

from confluent_kafka import KafkaError, KafkaException, Message

from consumers.ingest.errors import BrokerUnavailable
from schemas.codec import encode
from schemas.commands import AdmitDelivery
from schemas.topics import DELIVERIES
from streams.adapters.deliveries import delivery_producer
from streams.settings import Settings

log = logging.getLogger("sluicegate.ingest.producer")


class AsyncDeliveryProducer:
    """Produces ``AdmitDelivery`` commands keyed by admission key; awaitable acknowledgements."""

    def __init__(self, settings: Settings, client_id: str = "sluicegate-ingest") -> None:
        self.topic = settings.topic(DELIVERIES)
        self._producer = delivery_producer(settings, client_id, error_cb=self._on_error)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.fatal: str | None = None
        self._last_error_code: int | None = None
        self._last_error_at = float("-inf")
        # Delivery reports of the poll in progress; only the thread calling poll/flush adds.
        self._reports: list[tuple[asyncio.Future[KafkaError | None], KafkaError | None]] = []

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start the poll thread; delivery reports will settle futures on ``loop``."""
        self._loop = loop
        self._thread = threading.Thread(target=self._poll, name="ingest-producer", daemon=True)
        self._thread.start()

    def _on_error(self, err: KafkaError) -> None:
        # Runs on the poll thread. Transient errors (broker down) are retried by librdkafka;
        # a fatal one poisons the idempotent producer, so ingest stops being ready.
        if err.fatal():
            self.fatal = err.str()
            log.error("fatal producer error: %s", err.str())
            return
        # librdkafka repeats a connection error on every reconnect attempt: say it once per
        # kind of error and then at most every 30 s.
        now = time.monotonic()
        if err.code() != self._last_error_code or now - self._last_error_at > 30.0:
            self._last_error_code, self._last_error_at = err.code(), now
            log.warning("producer: %s (librdkafka keeps retrying)", err.str())

    def _poll(self) -> None:
        while not self._stop.is_set():
            self._producer.poll(0.05)
            self._hand_over()

    def _hand_over(self) -> None:
        """Settle the futures of the reports the last poll served, on the event loop."""
        if not self._reports or self._loop is None:
            return
        reports, self._reports = self._reports, []
        # RuntimeError: the loop is closed, so nobody is waiting any more.
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(_settle_all, reports)

    async def send(self, delivery: AdmitDelivery, timeout_s: float) -> None:
        """Produce ``delivery``; return once acknowledged, else :class:`BrokerUnavailable`."""
        loop = asyncio.get_running_loop()
        if self.fatal is not None:
            raise BrokerUnavailable(
                f"the ingest producer hit a fatal Kafka error ({self.fatal}); restart ingest",
                headers={"Retry-After": "5"},
            )
        acked: asyncio.Future[KafkaError | None] = loop.create_future()

        def report(err: KafkaError | None, _msg: Message) -> None:
            self._reports.append((acked, err))  # runs on the poll thread, inside poll()

        try:
            self._producer.produce(
                self.topic,
                key=delivery.admission_key.encode("utf-8"),
                value=encode(delivery),
                on_delivery=report,
            )
        except BufferError:
            raise BrokerUnavailable(
                "too many deliveries are waiting for Kafka; retry shortly"
            ) from None
        except KafkaException as e:
            raise BrokerUnavailable(f"Kafka refused the delivery: {e.args[0].str()}") from None
        # A timer instead of asyncio.wait_for, which wraps every await in a task of its own.
        timer = loop.call_later(timeout_s, _expire, acked)
        try:
            err = await acked
        except TimeoutError:
            raise BrokerUnavailable(
                f"Kafka did not acknowledge the delivery within {timeout_s:.1f} s; retry"
            ) from None
        finally:
            timer.cancel()
        if err is not None:
            if err.fatal():
                self.fatal = err.str()
                log.error("fatal producer error: %s", err.str())
            raise BrokerUnavailable(f"Kafka did not accept the delivery: {err.str()}")

    def reachable(self, timeout_s: float) -> bool:
        """Blocking: whether the broker answers and the deliveries topic exists."""
        if self.fatal is not None:
            return False
        try:
            metadata = self._producer.list_topics(self.topic, timeout=timeout_s)
        except KafkaException:
            return False
        topic = metadata.topics.get(self.topic)
        return topic is not None and topic.error is None and bool(topic.partitions)

    def close(self, flush_timeout_s: float = 5.0) -> int:
        """Blocking: flush what is queued, stop polling; return how many stayed unsent."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        remaining = int(self._producer.flush(flush_timeout_s))
        self._hand_over()
        if remaining:
            log.warning("%d deliveries were not acknowledged before shutdown", remaining)
        return remaining


def _settle_all(
    reports: list[tuple[asyncio.Future[KafkaError | None], KafkaError | None]],
) -> None:
    for future, err in reports:
        if not future.done():  # done: timed out, or the request was cancelled
            future.set_result(err)


def _expire(future: asyncio.Future[KafkaError | None]) -> None:
    if not future.done():
        future.set_exception(TimeoutError())
