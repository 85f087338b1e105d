"""The exactly-once consume-decide-produce loop (Kafka EOS v2 on confluent-kafka).

One transactional producer per instance, one read_committed consumer in the app's group
(range assignment, so the co-partitioned input topics land together), one state store per
input partition number, backed by a compacted changelog written in the same transaction.

Commit order, per batch (this order is the whole exactly-once argument):

1. consume a batch (outside any transaction; rebalance callbacks run only here);
2. ``prepare`` the app (may block: lookups happen before the transaction opens);
3. begin the transaction; fire due timers, then decide each record; produce the events;
4. produce the changelog records of every state the batch changed (explicit partition = the
   input partition);
5. ``send_offsets_to_transaction`` with the consumer group metadata, so a zombie from an
   older group generation cannot commit;
6. commit the transaction; only then write the buffered state into RocksDB.

An abortable error aborts, discards the buffered state and rewinds the consumer to the
committed offsets, so the batch is decided again from the same state. A fatal error or a
fence stops the instance. On assignment a partition's store is wiped and restored from its
changelog (read_committed, to its end) before any of its records is decided; on revocation
its store is closed (no transaction is ever open during a rebalance, see 1).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from sluicegate.config import Settings
from streams.engine.app import InputError, StreamApp
from streams.engine.store import PartitionStore, state_key, timer_key
from streams.errors import FatalKafkaError, KafkaUnavailable, ProcessorFenced, StateRestoreError

log = logging.getLogger("sluicegate.processor")

S = TypeVar("S")
C = TypeVar("C")
E = TypeVar("E")

_FENCED = {
    KafkaError._FENCED,
    KafkaError.PRODUCER_FENCED,
    KafkaError.INVALID_PRODUCER_EPOCH,
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}
_RETRIES = 8
_MIN_BATCH = 20
_RESTORE_TIMEOUT_S = 90.0


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class ProcessorStats:
    """Counters an operator (and the drills) can read; updated after each commit."""

    records: int = 0
    events: int = 0
    timers_fired: int = 0
    batches: int = 0
    aborts: int = 0
    dead_letters: int = 0
    restored_records: int = 0
    restore_seconds: float = 0.0
    assigned: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class _Input:
    message: Message
    topic: str
    partition: int
    offset: int
    record: object | None
    problem: str | None


class Processor(Generic[S, C, E]):
    """Runs one :class:`StreamApp` exactly once; one instance per ``instance_id``.

    ``instance_id`` names the transactional id: restart an instance with the same id so that
    its predecessor's open transaction is aborted at once instead of after the timeout; never
    run two live instances with one id (the second fences the first, by design).
    """

    def __init__(
        self,
        settings: Settings,
        app: StreamApp[S, C, E],
        *,
        instance_id: str,
        clock: Callable[[], int] = wall_clock_ms,
        batch_size: int = 2000,
        commit_interval_ms: int = 100,
        timer_batch: int = 500,
        transaction_timeout_ms: int = 10_000,
        stop: threading.Event | None = None,
    ) -> None:
        self.settings = settings
        self.app = app
        self.instance_id = instance_id
        self.clock = clock
        self.batch_size = batch_size
        self.commit_interval_s = commit_interval_ms / 1000
        self.timer_batch = timer_batch
        self.stop_event = stop or threading.Event()
        self.stats = ProcessorStats()
        # Records per batch, adapted so that a batch (decide + produce + commit) takes about
        # one commit interval: commits stay frequent under backlog, without ever consuming
        # while a transaction is open (rebalance callbacks only run between transactions).
        self._budget = batch_size
        self.dead_letter_topic = settings.topic("dead-letters")
        self._state_dir = Path(settings.state_dir) / app.name / instance_id
        self._stores: dict[int, PartitionStore] = {}
        self._producer = Producer(
            settings.producer_config(
                **{
                    "transactional.id": f"{settings.topic_prefix}{app.name}-{instance_id}",
                    "transaction.timeout.ms": transaction_timeout_ms,
                    "linger.ms": 5,
                    "client.id": f"{app.name}-{instance_id}",
                }
            )
        )
        self._consumer = Consumer(
            settings.kafka_config(
                **{
                    "group.id": f"{settings.topic_prefix}{app.name}",
                    "client.id": f"{app.name}-{instance_id}",
                    "isolation.level": "read_committed",
                    "enable.auto.commit": False,
                    "auto.offset.reset": "earliest",
                    "partition.assignment.strategy": "range",
                    "session.timeout.ms": 6000,
                    "heartbeat.interval.ms": 1500,
                    "max.poll.interval.ms": 300_000,
                }
            )
        )
        self._restorer = Consumer(
            settings.kafka_config(
                **{
                    "group.id": f"{settings.topic_prefix}{app.name}-restore-{instance_id}",
                    "isolation.level": "read_committed",
                    "enable.auto.commit": False,
                    "enable.partition.eof": True,
                    "auto.offset.reset": "earliest",
                }
            )
        )

    # -- lifecycle -------------------------------------------------------------------------

    def run(self) -> None:
        """Process until :meth:`stop` is called or a fatal error/fence raises."""
        try:
            self._producer.init_transactions(30)
        except KafkaException as e:
            raise self._translate(e, "initialising transactions") from e
        self._consumer.subscribe(
            list(self.app.input_topics),
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_revoke,
        )
        log.info("processor %s/%s started", self.app.name, self.instance_id)
        try:
            while not self.stop_event.is_set():
                self.step()
        finally:
            self._close()

    def stop(self) -> None:
        self.stop_event.set()

    def _close(self) -> None:
        try:
            self._consumer.close()
        finally:
            for store in self._stores.values():
                store.close()
            self._stores.clear()
            self._restorer.close()
            try:
                self._producer.flush(5)
            except KafkaException as e:
                # Already failed (e.g. fenced): the error that stopped us is the one to report.
                log.debug("flush on close: %s", e.args[0].str())
        log.info("processor %s/%s stopped", self.app.name, self.instance_id)

    # -- one batch -------------------------------------------------------------------------

    def step(self) -> None:
        """Consume one batch and commit it (or nothing, if there was nothing to do)."""
        messages = self._consumer.consume(self._budget, timeout=self.commit_interval_s)
        inputs = [i for i in (self._read(m) for m in messages) if i is not None]
        self.app.prepare([i.record for i in inputs if i.record is not None], self.clock())
        now = self.clock()
        due = [
            (partition, timer, key)
            for partition, store in sorted(self._stores.items())
            for timer, key in store.due_timers(now, self.timer_batch)
        ]
        if not inputs and not due:
            return

        began = time.monotonic()
        try:
            self._producer.begin_transaction()
        except KafkaException as e:
            raise self._translate(e, "beginning a transaction") from e
        try:
            events = 0
            for partition, timer, key in due:
                store = self._stores[partition]
                store.put(timer, None)
                events += self._handle(store, key, self.app.timer_command(), now, fired=True)
            offsets: dict[tuple[str, int], int] = {}
            for item in inputs:
                offsets[(item.topic, item.partition)] = item.offset + 1
                events += self._decide_input(item, now)
            for partition, store in self._stores.items():
                for store_key, value in store.pending().items():
                    self._produce(self.app.changelog_topic, store_key, value, partition)
            if offsets:
                positions = [TopicPartition(t, p, o) for (t, p), o in offsets.items()]
                self._retrying(
                    lambda: self._producer.send_offsets_to_transaction(
                        positions, self._consumer.consumer_group_metadata(), 30
                    )
                )
            self._retrying(lambda: self._producer.commit_transaction(30))
        except KafkaException as e:
            self._recover(e)
            return
        except BaseException:
            # A bug in decide/evolve or a codec error: nothing of this batch may leave.
            self._abort_quietly()
            raise
        for store in self._stores.values():
            store.apply()
        self._adapt_budget(len(inputs) + len(due), time.monotonic() - began)
        self.stats.batches += 1
        self.stats.records += len(inputs)
        self.stats.events += events
        self.stats.timers_fired += len(due)

    def _adapt_budget(self, handled: int, seconds: float) -> None:
        if handled < self._budget or seconds <= 0:
            return  # a partial batch says nothing about how many would fit
        fitting = int(handled * self.commit_interval_s / seconds)
        self._budget = max(_MIN_BATCH, min(self.batch_size, (self._budget + fitting) // 2))

    def _read(self, msg: Message) -> _Input | None:
        err = msg.error()
        if err is not None:
            if err.code() == KafkaError._PARTITION_EOF:
                return None
            if err.fatal():
                raise FatalKafkaError(f"consumer: {err.str()}")
            log.warning("consumer error (librdkafka retries): %s", err.str())
            return None
        topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
        if topic is None or partition is None or offset is None:
            return None
        if partition not in self._stores:
            return None
        value = msg.value()
        if msg.key() is None or value is None:
            return _Input(msg, topic, partition, offset, None, "record without key or value")
        try:
            return _Input(msg, topic, partition, offset, self.app.decode_input(value), None)
        except InputError as e:
            return _Input(msg, topic, partition, offset, None, str(e))

    def _decide_input(self, item: _Input, now: int) -> int:
        msg = item.message
        if item.record is None:
            # Undecodable input is kept, not dropped: an operator can replay it once fixed.
            self._produce(self.dead_letter_topic, _key(msg), msg.value(), None)
            self.stats.dead_letters += 1
            log.warning(
                "dead-lettered %s[%d]@%d: %s", item.topic, item.partition, item.offset, item.problem
            )
            return 0
        command = self.app.to_command(item.record)
        if command is None:
            return 0
        return self._handle(self._stores[item.partition], _key(msg), command, now, fired=False)

    def _handle(self, store: PartitionStore, key: str, command: C, now: int, *, fired: bool) -> int:
        skey = state_key(key)
        raw = store.get(skey)
        state = None if raw is None else self.app.decode_state(raw)
        old_due = None if state is None else self.app.next_due_ms(state)
        events = self.app.decide(state, command, now)
        for event in events:
            state = self.app.evolve(state, event)
            route = self.app.route(event)
            if route is not None:
                self._produce(route.topic, route.key, self.app.encode_event(event), None)
        if not events and not fired:
            return 0
        new_due = None if state is None else self.app.next_due_ms(state)
        if events:
            store.put(skey, None if state is None else self.app.encode_state(state))
        if old_due is not None and (old_due != new_due or fired):
            store.put(timer_key(old_due, key), None)
        if new_due is not None:
            if fired and not events and new_due <= now:
                # The core had nothing to do at a due time: never spin on it.
                log.warning("timer for %s due at %d produced nothing; dropped", key, new_due)
            else:
                store.put(timer_key(new_due, key), b"")
        return len(events)

    def _produce(self, topic: str, key: str, value: bytes | None, partition: int | None) -> None:
        kwargs: dict[str, Any] = {"key": key.encode(), "value": value}
        if partition is not None:
            kwargs["partition"] = partition
        while True:
            try:
                self._producer.produce(topic, **kwargs)
                return
            except BufferError:
                self._producer.poll(0.05)

    # -- errors ----------------------------------------------------------------------------

    def _retrying(self, call: Callable[[], object]) -> None:
        for attempt in range(_RETRIES):
            try:
                call()
                return
            except KafkaException as e:
                err = e.args[0]
                if not err.retriable() or attempt == _RETRIES - 1:
                    raise
                time.sleep(min(0.05 * 2**attempt, 1.0))

    def _recover(self, e: KafkaException) -> None:
        err = e.args[0]
        if err.fatal() or err.code() in _FENCED:
            self._abort_quietly()
            raise self._translate(e, "committing a batch") from e
        log.warning("aborting the batch and rewinding: %s", err.str())
        self.stats.aborts += 1
        self._abort_quietly()
        self._rewind()

    def _abort_quietly(self) -> None:
        for store in self._stores.values():
            store.discard()
        try:
            self._producer.abort_transaction(30)
        except KafkaException as e:
            err = e.args[0]
            if err.fatal() or err.code() in _FENCED:
                raise self._translate(e, "aborting a batch") from e
            log.debug("abort_transaction: %s", err.str())

    def _rewind(self) -> None:
        """Seek every assigned partition back to its committed offset."""
        assignment = self._consumer.assignment()
        if not assignment:
            return
        try:
            committed = self._consumer.committed(assignment, timeout=30)
        except KafkaException as e:
            raise KafkaUnavailable(f"cannot read committed offsets: {e.args[0].str()}") from e
        for tp in committed:
            if tp.offset < 0:
                tp.offset = OFFSET_BEGINNING
            try:
                self._consumer.seek(tp)
            except KafkaException as e:
                log.warning(
                    "seek %s[%d] failed (%s); a rebalance will reset it",
                    tp.topic,
                    tp.partition,
                    e.args[0].str(),
                )

    def _translate(self, e: KafkaException, doing: str) -> Exception:
        err = e.args[0]
        if err.code() in _FENCED:
            return ProcessorFenced(
                f"{self.app.name}/{self.instance_id} was fenced while {doing} ({err.str()}): "
                "another instance took over; this one stops"
            )
        if err.fatal():
            return FatalKafkaError(f"fatal Kafka error while {doing}: {err.str()}")
        return KafkaUnavailable(f"Kafka error while {doing}: {err.str()}")

    # -- rebalancing and restore -----------------------------------------------------------

    def _on_assign(self, _consumer: Consumer, partitions: Sequence[TopicPartition]) -> None:
        wanted = sorted({tp.partition for tp in partitions} - set(self._stores))
        for partition in wanted:
            self._stores[partition] = self._restore(partition)
        self.stats.assigned = sorted(self._stores)
        log.info("assigned partitions %s", self.stats.assigned)

    def _on_revoke(self, _consumer: Consumer, partitions: Sequence[TopicPartition]) -> None:
        for partition in sorted({tp.partition for tp in partitions}):
            store = self._stores.pop(partition, None)
            if store is not None:
                store.close()
        self.stats.assigned = sorted(self._stores)
        log.info("revoked; now holding %s", self.stats.assigned)

    def _restore(self, partition: int) -> PartitionStore:
        """A wiped store for ``partition``, filled from its changelog up to the end."""
        started = time.monotonic()
        store = PartitionStore(self._state_dir / f"p{partition}", fresh=True)
        topic = self.app.changelog_topic
        try:
            low, high = self._restorer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=30, cached=False
            )
        except KafkaException as e:
            raise StateRestoreError(f"{topic}[{partition}]: {e.args[0].str()}") from e
        restored = 0
        if high > low:
            self._restorer.assign([TopicPartition(topic, partition, low)])
            deadline = time.monotonic() + _RESTORE_TIMEOUT_S
            done = False
            while not done:
                if time.monotonic() > deadline:
                    raise StateRestoreError(
                        f"{topic}[{partition}] did not reach offset {high} within "
                        f"{_RESTORE_TIMEOUT_S:.0f} s (an open transaction of a dead instance "
                        "should time out sooner; check the broker)"
                    )
                batch: list[tuple[str, bytes | None]] = []
                for msg in self._restorer.consume(5000, timeout=0.2):
                    err = msg.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            done = True
                            continue
                        raise StateRestoreError(f"{topic}[{partition}]: {err.str()}")
                    batch.append((_key(msg), msg.value()))
                    if (msg.offset() or 0) >= high - 1:
                        done = True
                if batch:
                    store.restore_batch(iter(batch))
                    restored += len(batch)
            self._restorer.unassign()
        elapsed = time.monotonic() - started
        self.stats.restored_records += restored
        self.stats.restore_seconds += elapsed
        log.info("restored %s[%d]: %d records in %.2f s", topic, partition, restored, elapsed)
        return store


def _key(msg: Message) -> str:
    key = msg.key()
    return "" if key is None else bytes(key).decode("utf-8", errors="replace")
