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
import contextlib
import logging
import time

from confluent_kafka import KafkaError, KafkaException, Message, Producer

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
RENEW_GAP_S = 1.0
"""A producer that met a fatal error is replaced at once, then not again for this long: a
fatal error that every new producer meets is answered with 503s, not with a new producer per
request."""


class AsyncDeliveryProducer:
    """Produces ``AdmitDelivery`` commands keyed by admission key; awaitable acknowledgements.

    A producer that met a fatal error (librdkafka refuses every later message then) is
    replaced on the loop as soon as the error shows: in a poll, a delivery report or a
    refused produce, and then at most once per :data:`RENEW_GAP_S`. Until it is, sends are
    answered with :class:`~consumers.ingest.errors.BrokerUnavailable` and
    :meth:`reachable` is false."""

    def __init__(self, settings: Settings, client_id: str = "sluicegate-ingest") -> None:
        self.topic = settings.topic(DELIVERIES)
        self._settings = settings
        self._client_id = client_id
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._busy = False  # whether the timer is the 1 ms one
        self.fatal: str | None = None
        """The fatal error the producer in use met, until it is replaced."""
        self.renewals = 0
        """Producers replaced after a fatal error."""
        self._renewed_at = float("-inf")
        self._last_error_code: int | None = None
        self._last_error_at = float("-inf")
        self._generation = 0
        self._producer = self._new_producer()

    def _new_producer(self) -> Producer:
        # Errors of a producer already replaced are its own: the generation tells them apart.
        self._generation += 1
        generation = self._generation
        return delivery_producer(
            self._settings, self._client_id, error_cb=lambda err: self._on_error(err, generation)
        )

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start polling on ``loop``, the loop :meth:`send` and :meth:`close` are awaited on."""
        self._loop = loop
        self._schedule(busy=False)

    def _on_error(self, err: KafkaError, generation: int) -> None:
        # Runs inside poll(), on the loop. Transient errors (broker down) are retried by
        # librdkafka; a fatal one poisons the idempotent producer until it is replaced.
        if generation != self._generation:
            return
        if _is_fatal(err):
            self._met_fatal(err.str())
            return
        # librdkafka repeats a connection error on every reconnect attempt: say it once per
        # kind of error and then at most every 30 s.
        now = time.monotonic()
        if err.code() != self._last_error_code or now - self._last_error_at > 30.0:
            self._last_error_code, self._last_error_at = err.code(), now
            log.warning("producer: %s (librdkafka keeps retrying)", err.str())

    def _met_fatal(self, reason: str) -> None:
        if self.fatal is None:
            log.error("fatal producer error: %s; replacing the producer", reason)
            self.fatal = reason

    def _usable(self) -> bool:
        """Whether the producer in use can take deliveries, after replacing it if it met a
        fatal error and the last replacement is :data:`RENEW_GAP_S` old. On the loop only."""
        if self.fatal is None:
            return True
        now = time.monotonic()
        if now - self._renewed_at < RENEW_GAP_S:
            return False
        old, self._producer = self._producer, self._new_producer()
        self._renewed_at, self.renewals, self.fatal = now, self.renewals + 1, None
        log.warning("replaced the producer (%d so far)", self.renewals)
        # What the old one still holds will never be acknowledged: its senders hear so now
        # (the purge's reports) or at their timeout, and a retry is deduplicated by admission.
        with contextlib.suppress(KafkaException, SystemError):
            old.purge()
        with contextlib.suppress(KafkaException, SystemError):
            old.poll(0)
        return True

    def _schedule(self, *, busy: bool) -> None:
        assert self._loop is not None
        if self._timer is not None:
            self._timer.cancel()
        self._busy = busy
        self._timer = self._loop.call_later(BUSY_POLL_S if busy else IDLE_POLL_S, self._tick)

    def _tick(self) -> None:
        self._timer = None
        try:
            try:
                self._producer.poll(0)  # serves delivery reports and errors, here on the loop
            except (KafkaException, SystemError) as e:
                # confluent-kafka raises a fatal error from poll() rather than passing it to
                # error_cb (a SystemError when a delivery report was served in the same poll).
                fatal = _fatal_in(e)
                if fatal is None:
                    raise
                self._met_fatal(fatal.str())
            self._usable()
        finally:
            # Rescheduled even if a callback raised (the loop logs it): a producer that
            # stopped polling would answer every later request 503 and never say why.
            # len(): messages queued, in flight, or acknowledged with the report unserved.
            self._schedule(busy=len(self._producer) > 0)

    async def send(self, delivery: AdmitDelivery, timeout_s: float) -> None:
        """Produce ``delivery``; return once acknowledged, else :class:`BrokerUnavailable`."""
        loop = asyncio.get_running_loop()
        acked: asyncio.Future[KafkaError | None] = loop.create_future()

        def report(err: KafkaError | None, _msg: Message) -> None:
            if not acked.done():  # done: timed out, or the request was cancelled
                acked.set_result(err)  # inside poll(), which only the loop calls

        while True:  # twice at most: a fatal refusal replaces the producer or raises
            if not self._usable():
                raise BrokerUnavailable(
                    f"the ingest producer met a fatal Kafka error ({self.fatal}) and is being "
                    "replaced; retry",
                    headers={"Retry-After": "1"},
                )
            try:
                self._producer.produce(
                    self.topic,
                    key=delivery.admission_key.encode("utf-8"),
                    value=encode(delivery),
                    on_delivery=report,
                )
                break
            except BufferError:
                raise BrokerUnavailable(
                    "too many deliveries are waiting for Kafka; retry shortly"
                ) from None
            except KafkaException as e:
                if not _is_fatal(e.args[0]):
                    raise BrokerUnavailable(
                        f"Kafka refused the delivery: {e.args[0].str()}"
                    ) from None
                self._met_fatal(e.args[0].str())
        generation = self._generation
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
            if _is_fatal(err) and generation == self._generation:
                self._met_fatal(err.str())
            raise BrokerUnavailable(f"Kafka did not accept the delivery: {err.str()}")

    def reachable(self, timeout_s: float) -> bool:
        """Blocking: whether the broker answers and the deliveries topic exists."""
        producer = self._producer  # replaced on the loop; this runs on another thread
        if self.fatal is not None:
            return False
        try:
            metadata = producer.list_topics(self.topic, timeout=timeout_s)
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


def _is_fatal(err: KafkaError) -> bool:
    return err.fatal() or err.code() == KafkaError._FATAL


def _fatal_in(error: BaseException) -> KafkaError | None:
    """The fatal Kafka error ``error`` is or was raised from, if any."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, KafkaException) and isinstance(seen.args[0], KafkaError):
            return seen.args[0] if _is_fatal(seen.args[0]) else None
        seen = seen.__cause__ or seen.__context__
    return None


def _expire(future: asyncio.Future[KafkaError | None]) -> None:
    if not future.done():
        future.set_exception(TimeoutError())
