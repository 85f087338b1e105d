"""An asyncio face on one confluent-kafka producer for the ``deliveries`` topic.

librdkafka reports acknowledgements only from ``poll()``, which the event loop itself calls:
every millisecond while a delivery is unacknowledged, every 100 ms otherwise (so that error
callbacks are served while idle). A delivery report therefore settles its future directly,
on the loop's thread. (A poll thread, used before, had to take the GIL for every report
while the loop thread held it for request handling; at 1,000 posts/s that hand-over added
30 to 55 ms at the median between Kafka's acknowledgement and the handler resuming.)

Guarantee of :meth:`AsyncDeliveryProducer.send`: when it returns, the delivery was
acknowledged by all in-sync replicas through the idempotent producer of
:func:`streams.adapters.deliveries.delivery_producer` (no duplicate from producer retries). When it
raises :class:`~consumers.ingest.errors.BrokerUnavailable`, the delivery was *not confirmed*:
it may still be written later (a queued message cannot be recalled), which is harmless
because the sender's retry is deduplicated by admission.
"""

from __future__ import annotations

import asyncio
import logging
import time

from confluent_kafka import KafkaError, KafkaException, Message

from consumers.ingest.errors import BrokerUnavailable
from schemas.codec import encode
from schemas.commands import AdmitDelivery
from schemas.topics import DELIVERIES
from streams.adapters.deliveries import delivery_producer
from streams.settings import Settings

log = logging.getLogger("sluicegate.ingest.producer")

BUSY_POLL_S = 0.001
"""How often the loop polls while a delivery waits for its acknowledgement."""
IDLE_POLL_S = 0.1
"""How often it polls otherwise, for error callbacks."""


class AsyncDeliveryProducer:
    """Produces ``AdmitDelivery`` commands keyed by admission key; awaitable acknowledgements."""

    def __init__(self, settings: Settings, client_id: str = "sluicegate-ingest") -> None:
        self.topic = settings.topic(DELIVERIES)
        self._producer = delivery_producer(settings, client_id, error_cb=self._on_error)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._busy = False  # whether the timer is the 1 ms one
        self.fatal: str | None = None
        self._last_error_code: int | None = None
        self._last_error_at = float("-inf")

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start polling on ``loop``, the loop :meth:`send` and :meth:`close` are awaited on."""
        self._loop = loop
        self._schedule(busy=False)

    def _on_error(self, err: KafkaError) -> None:
        # Runs inside poll(), on the loop. Transient errors (broker down) are retried by
        # librdkafka; a fatal one poisons the idempotent producer, so ingest stops being ready.
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

    def _schedule(self, *, busy: bool) -> None:
        assert self._loop is not None
        if self._timer is not None:
            self._timer.cancel()
        self._busy = busy
        self._timer = self._loop.call_later(BUSY_POLL_S if busy else IDLE_POLL_S, self._tick)

    def _tick(self) -> None:
        self._timer = None
        try:
            self._producer.poll(0)  # serves delivery reports and errors, here on the loop
        finally:
            # Rescheduled even if a callback raised (the loop logs it): a producer that
            # stopped polling would answer every later request 503 and never say why.
            # len(): messages queued, in flight, or acknowledged with the report unserved.
            self._schedule(busy=len(self._producer) > 0)

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
            if not acked.done():  # done: timed out, or the request was cancelled
                acked.set_result(err)  # inside poll(), which only the loop calls

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
        if not self._busy and self._timer is not None:
            self._schedule(busy=True)
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

    async def close(self, flush_timeout_s: float = 5.0) -> int:
        """Stop polling once what is queued is acknowledged or ``flush_timeout_s`` has passed;
        return how many deliveries stayed unacknowledged. Reports are still served on the
        loop meanwhile, so a request waiting for one is answered."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        deadline = time.monotonic() + flush_timeout_s
        self._producer.poll(0)
        while len(self._producer) > 0 and time.monotonic() < deadline:
            await asyncio.sleep(BUSY_POLL_S)
            self._producer.poll(0)
        remaining = len(self._producer)
        if remaining:
            log.warning("%d deliveries were not acknowledged before shutdown", remaining)
        return remaining


def _expire(future: asyncio.Future[KafkaError | None]) -> None:
    if not future.done():
        future.set_exception(TimeoutError())
