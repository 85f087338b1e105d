"""Admission outcomes for ``?wait=``: a read_committed tail of the ``runs`` topic.

The processor writes exactly one outcome per delivery id (``RunAdmitted``,
``DeliveryDeduplicated``, ``OccurrenceConflict`` or ``DeliveryRejected``) in a transaction.
:class:`OutcomeTracker` reads the topic from the offsets that were its end when the tracker
started, so it sees the outcome of every delivery produced after it became ``ready``; a
request registers its waiter *before* producing, so an outcome that comes back faster than
the HTTP handler resumes is not missed.

Only committed records are read (``isolation.level=read_committed``): an outcome from an
aborted transaction is never reported. Records are decoded only while someone waits. This is
a convenience for senders, not a delivery guarantee: an outcome that takes longer than the
wait is answered ``pending`` and can be looked up later by delivery id in the read model.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import uuid
from dataclasses import dataclass

from confluent_kafka import KafkaException, TopicPartition

from schemas.codec import decode
from schemas.errors import SchemaError
from schemas.events import DeliveryDeduplicated, DeliveryRejected, OccurrenceConflict, RunAdmitted
from schemas.topics import RUNS
from streams.kafka.clients import read_committed_consumer
from streams.kafka.consuming import take
from streams.settings import Settings

log = logging.getLogger("sluicegate.ingest.outcomes")

ADMITTED = "admitted"
DEDUPLICATED = "deduplicated"
CONFLICT = "conflict"
REJECTED = "rejected"
PENDING = "pending"


@dataclass(frozen=True)
class Outcome:
    """What admission decided for one delivery, in the projection's words: ``admitted``,
    ``deduplicated`` (``DeliveryDeduplicated``: a copy, answered with the original run),
    ``conflict`` or ``rejected``. ``duplicate`` in the answer is true for a copy."""

    outcome: str
    run_id: str | None
    reason: str | None = None

    def as_json(self) -> dict[str, object]:
        return {
            "outcome": self.outcome,
            "run_id": self.run_id,
            "duplicate": self.outcome == DEDUPLICATED,
            "reason": self.reason,
        }


def outcome_of(record: object) -> tuple[str, Outcome] | None:
    """``(delivery_id, outcome)`` if ``record`` is an admission outcome, else ``None``."""
    if isinstance(record, RunAdmitted):
        return record.delivery_id, Outcome(ADMITTED, record.run_id)
    if isinstance(record, DeliveryDeduplicated):
        return record.delivery_id, Outcome(DEDUPLICATED, record.run_id, record.reason)
    if isinstance(record, OccurrenceConflict):
        return record.delivery_id, Outcome(CONFLICT, record.run_id, "content_differs")
    if isinstance(record, DeliveryRejected):
        return record.delivery_id, Outcome(REJECTED, None, record.reason)
    return None


class OutcomeTracker:
    """Resolves waiters by delivery id from the ``runs`` topic; one background thread."""

    def __init__(self, settings: Settings) -> None:
        self.topic = settings.topic(RUNS)
        self._consumer = read_committed_consumer(
            settings,
            # assign() only, no group membership or commits: the id is just required.
            group_id=f"{settings.topic_prefix}ingest-outcomes-{uuid.uuid4().hex[:8]}",
            tuning={"auto.offset.reset": "latest"},
        )
        self._lock = threading.Lock()
        self._waiters: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Future[Outcome]]] = {}
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def ready(self) -> bool:
        """Whether the tail is positioned: outcomes of deliveries produced from now on arrive."""
        return self._ready.is_set()

    def start(self) -> None:
        """Start the tail thread; it positions itself, retrying while Kafka is unreachable."""
        self._thread = threading.Thread(target=self._run, name="ingest-outcomes", daemon=True)
        self._thread.start()

    def wait_ready(self, timeout_s: float) -> bool:
        return self._ready.wait(timeout_s)

    def expect(self, delivery_id: str) -> asyncio.Future[Outcome]:
        """Register a waiter before producing; the future gets the outcome when it is read."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Outcome] = loop.create_future()
        with self._lock:
            self._waiters[delivery_id] = (loop, future)
        return future

    def forget(self, delivery_id: str) -> None:
        """Drop a waiter (answered, timed out or the delivery was never produced)."""
        with self._lock:
            self._waiters.pop(delivery_id, None)

    async def wait(self, future: asyncio.Future[Outcome], timeout_s: float) -> Outcome | None:
        """The outcome, or ``None`` if it does not arrive within ``timeout_s``."""
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout_s)
        except TimeoutError:
            return None

    def _position(self) -> None:
        metadata = self._consumer.list_topics(self.topic, timeout=5.0)
        topic = metadata.topics.get(self.topic)
        if topic is None or topic.error is not None or not topic.partitions:
            raise KafkaException(f"topic {self.topic} not available")
        assignment = []
        for partition in sorted(topic.partitions):
            _, high = self._consumer.get_watermark_offsets(
                TopicPartition(self.topic, partition), timeout=5.0, cached=False
            )
            assignment.append(TopicPartition(self.topic, partition, high))
        self._consumer.assign(assignment)

    def _run(self) -> None:
        attempts = 0
        while not self._stop.is_set() and not self._ready.is_set():
            try:
                self._position()
                self._ready.set()
            except KafkaException as e:
                # Once, then every 30 attempts (seconds): the cause does not change often.
                if attempts % 30 == 0:
                    log.warning("cannot position on %s yet (%s); retrying", self.topic, e)
                attempts += 1
                self._stop.wait(1.0)
        while not self._stop.is_set():
            messages = take(self._consumer, 500, 0.2)
            with self._lock:
                anyone = bool(self._waiters)
            if not anyone:
                continue  # nobody waits: skip decoding
            for msg in messages:
                value = msg.value()
                if msg.error() is None and value is not None:
                    self._offer(value)

    def _offer(self, value: bytes) -> None:
        try:
            found = outcome_of(decode(value))
        except SchemaError as e:
            # Not ours to park: the projector dead-letters unreadable records.
            log.debug("skipping an unreadable record on %s: %s", self.topic, e)
            return
        if found is None:
            return
        delivery_id, outcome = found
        with self._lock:
            waiter = self._waiters.pop(delivery_id, None)
        if waiter is not None:
            loop, future = waiter
            # RuntimeError: the loop is closed, so nobody is waiting any more.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_settle, future, outcome)

    def close(self) -> None:
        """Blocking: stop the thread and close the consumer."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._consumer.close()


def _settle(future: asyncio.Future[Outcome], outcome: Outcome) -> None:
    if not future.done():
        future.set_result(outcome)
