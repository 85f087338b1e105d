"""The exactly-once consume-decide-produce loop (Kafka EOS v2 on confluent-kafka).

One transactional producer per instance, one read_committed consumer in the app's group
(range assignment, so the co-partitioned input topics land together), one state store per
input partition number, backed by a compacted changelog written in the same transaction.

Commit order, per batch (this order is the whole exactly-once argument):

1. consume a batch (outside any transaction; rebalance callbacks run only here): whatever
   has arrived, up to the budget, waiting only while nothing has;
2. ``prepare`` the app (may block: lookups happen before the transaction opens); if the batch
   has records, start reading the input topics' partition counts (on a helper thread, so
   the round trips overlap steps 3 to 5);
3. begin the transaction; fire due timers, then decide each record; produce the events;
4. produce the changelog records of every state the batch changed (explicit partition = the
   input partition), and ``m/partitions`` once per changelog partition;
5. ``send_offsets_to_transaction`` with the consumer group metadata and the offsets of
   *every* assigned partition (those the batch advanced, the committed ones otherwise), so
   every transaction, timer-only ones included, is fenced: a zombie whose group generation
   is stale cannot commit anything; then wait for the counts of step 2: a count that
   differs from the one the state was restored with (changed by hand) aborts the
   transaction and stops the instance, so nothing decided with moved keys is committed;
6. commit the transaction, resuming a timed-out commit (never aborting it); only then write
   the buffered state into RocksDB and advance the tracked offsets.

An app with effects (``effects.py``, :class:`~streams.engine.effects.EffectfulApp`) continues:

7. after the commit, and only then, the effects of the transaction's events go to a thread
   pool, in order per key; never for a transaction that aborted, never for records read back
   on restore;
8. a worker performs one only if this instance still holds the key's partition in the same
   assignment and the effect is still fresh (an expired one is answered by the app);
9. the answer is queued and decided at the start of a later batch (after the due timers,
   before the inputs), in a transaction of its own; an answer whose partition was revoked
   meanwhile is dropped, because the new owner reconciles from the restored state. After a
   (re)assignment, ``on_restored`` may queue a command for any restored key the same way.

Failpoints (``failpoints.py``, off unless ``SLUICEGATE_FAILPOINTS`` is set) kill or stop the
process at ``before_commit`` (step 5 done, 6 not), ``after_commit`` (6 done, 7 not) and
around the perform of step 8.

Errors (``transactions.py``): an abortable error aborts and discards the buffered state;
the batch is decided again in place from the same state (a few times: the transaction right
after an abort often fails too while the producer bumps its epoch), and if it still fails,
every assigned partition is sought back to its committed offset so the batch is consumed
and decided again. A seek that still fails, an abort librdkafka refuses or a commit that
never completes (:class:`~streams.errors.TransactionUnresolved`: Kafka out of reach for
longer than the transaction timeout, say) leaves the outcome unknown: the instance starts
over in place, as a restart with the same id would (stores closed without checkpoints, the
group left, a new producer initialised once the broker answers, the group joined again and
every partition restored). So does a restore that cannot finish within its bound
(:class:`~streams.errors.RestoreTimedOut`), 1 s later and doubling while it keeps failing.
A fatal error or a fence stops it, except the broker's own fence: a transaction that
outlived its timeout (the process was stopped or starved) is aborted by the broker, which
bumps the producer's epoch; the instance then replaces its producer (same transactional id;
a replacement the broker does not answer starts over too) and rewinds as after a stale
generation. Nothing ever commits offsets past an undecided record.

Poison records: when a record can never be produced (``MSG_SIZE_TOO_LARGE``: an event or a
state over ``message.max.bytes``), the transaction is aborted and the batch is decided again
in parts (the first half, then the rest, halving on each failure) until a single record
fails alone. That record gets its own transaction with an explicit outcome: a dead letter
with the reason and its original bytes, plus the app's :meth:`StreamApp.undecidable` events
(falling back to a dead letter without the bytes). The other records are decided normally.

Assignment (``restore.py``): partition counts are checked, committed offsets are read stable,
each partition's store is restored from its changelog to the true end, and the consumer is
assigned at exactly those offsets. On revocation the stores are closed (no transaction is
ever open during a rebalance, see 1); a clean revoke leaves a checkpoint of the changelog
position each store reflects (``checkpoint.py``), so taking the partition back reads only
what the store lacks. Lost partitions and an instance stopping on an error leave none.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Generic, TypeVar

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from schemas.topics import DEAD_LETTERS
from streams.clock import wall_clock_ms
from streams.engine import failpoints
from streams.engine import transactions as txn
from streams.engine.app import StreamApp
from streams.engine.assignment import Assignment
from streams.engine.batch import Answer, Input, Isolated, Item, ProcessorStats, Timer, read
from streams.engine.budget import BatchBudget, next_budget
from streams.engine.deciding import Decider
from streams.engine.effects import EffectRunner, is_effectful
from streams.engine.restore import RESTORE_MARGIN_S, Restorer
from streams.errors import (
    FatalKafkaError,
    ProcessorFenced,
    RestoreTimedOut,
    StreamsError,
    TransactionUnresolved,
)
from streams.kafka.clients import read_committed_consumer, transactional_producer
from streams.kafka.consuming import take
from streams.settings import Settings

log = logging.getLogger("sluicegate.processor")

S = TypeVar("S")
C = TypeVar("C")
E = TypeVar("E")

_MIN_BATCH = 20
_COMMIT_MARGIN_S = 10.0
"""A transaction's calls are retried up to its transaction timeout plus this margin."""
_ANY_PARTITION = -1
"""librdkafka's "unassigned partition": the partitioner picks one from the key."""
IN_PLACE_ATTEMPTS = 5
"""An aborted batch is decided again in place this often (the first transaction after an
abort often fails too, while the producer bumps its epoch) before it is rewound."""
RESTORE_RETRY_S = (1.0, 30.0)
"""After a restore that timed out, the processor starts over this long later: the first
pause, doubled on each failure in a row up to the second (reset by an assignment that
restores)."""


class _Outcome(enum.Enum):
    COMMITTED = "committed"
    ABORTED = "aborted"
    STALE = "stale"  # aborted: this instance's group generation is stale
    EXPIRED = "expired"  # the broker aborted it past its timeout; the producer was renewed


class Processor(Generic[S, C, E]):
    """Runs one :class:`StreamApp` exactly once; one instance per ``instance_id``.

    ``instance_id`` names the transactional id: restart an instance with the same id so that
    its predecessor's open transaction is aborted at once instead of after the timeout; never
    run two live instances with one id (the second fences the first, by design). With
    ``static_membership`` it is also the consumer's ``group.instance.id``: a restarted instance
    takes its partitions back at once instead of after the dead one's session timeout (and an
    instance that stops keeps them for that long).
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
        static_membership: bool = False,
    ) -> None:
        self.settings = settings
        self.app = app
        self.instance_id = instance_id
        self.who = f"{app.name}/{instance_id}"
        self.clock = clock
        self.commit_interval_s = commit_interval_ms / 1000
        self.timer_batch = timer_batch
        self.stop_event = stop or threading.Event()
        self.stats = ProcessorStats()
        # Records per transaction: sized so that deciding a batch takes about one commit
        # interval (budget.py); consumption never happens while a transaction is open.
        self._rule = BatchBudget(self.commit_interval_s, min(_MIN_BATCH, batch_size), batch_size)
        self._budget = batch_size
        self._timeout_s = transaction_timeout_ms / 1000
        self._deadline_s = self._timeout_s + _COMMIT_MARGIN_S
        group = f"{settings.topic_prefix}{app.name}"
        membership = {"group.instance.id": instance_id} if static_membership else {}
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
        self._group = group
        self._consumer_tuning: dict[str, object] = {
            "auto.offset.reset": "earliest",
            "partition.assignment.strategy": "range",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 1500,
            "max.poll.interval.ms": 300_000,
            **membership,
        }
        self._producer = self._new_producer()
        self._consumer = self._new_consumer()
        restorer = Restorer(
            settings,
            f"{group}-restore-{instance_id}",
            bound_s=transaction_timeout_ms / 1000 + RESTORE_MARGIN_S,
        )
        self._held = Assignment(
            restorer,
            app.input_topics,
            app.changelog_topic,
            Path(settings.state_dir) / app.name / instance_id,
            self.who,
        )
        self._decider = Decider(app, self._held.stores, settings.topic(DEAD_LETTERS), self._produce)
        self._failpoints = failpoints.from_env()
        self._restore_retry_s = RESTORE_RETRY_S[0]
        self.effects: EffectRunner | None = None
        if is_effectful(app):
            self.effects = EffectRunner(app, clock, self._failpoints, app.effect_threads)

    # -- lifecycle -------------------------------------------------------------------------

    def _new_producer(self) -> Producer:
        return transactional_producer(
            self.settings,
            transactional_id=f"{self.settings.topic_prefix}{self.app.name}-{self.instance_id}",
            client_id=f"{self.app.name}-{self.instance_id}",
            tuning=self._producer_tuning,
        )

    def _new_consumer(self) -> Consumer:
        return read_committed_consumer(
            self.settings,
            group_id=self._group,
            client_id=f"{self.app.name}-{self.instance_id}",
            tuning=self._consumer_tuning,
        )

    def run(self) -> None:
        """Process until :meth:`stop` is called or a fatal error/fence raises.

        Kafka out of reach for longer than a transaction can wait (its commit or abort cannot
        complete: :class:`~streams.errors.TransactionUnresolved`) does not end it, nor does a
        restore that cannot finish in time (:class:`~streams.errors.RestoreTimedOut`: the
        broker away, or a transaction held open on the partition): it starts over in place
        (:meth:`_start_over`), after a restore's failure a back-off later
        (:data:`RESTORE_RETRY_S`), and goes on once the broker answers.
        """
        try:
            self._producer.init_transactions(30)
        except KafkaException as e:
            raise txn.translate(e, self.who, "initialising transactions") from e
        self._subscribe()
        log.info("processor %s started", self.who)
        try:
            while not self.stop_event.is_set():
                try:
                    self.step()
                except TransactionUnresolved as e:
                    self._start_over(e)
                except RestoreTimedOut as e:
                    pause_s = self._restore_retry_s
                    self._restore_retry_s = min(pause_s * 2, RESTORE_RETRY_S[1])
                    self._start_over(e, pause_s=pause_s)
        except BaseException:
            self._held.checkpoints = False  # a transaction's outcome may be unknown
            raise
        finally:
            self._close()

    def stop(self) -> None:
        self.stop_event.set()

    def _subscribe(self) -> None:
        self._consumer.subscribe(
            list(self.app.input_topics),
            on_assign=lambda _, partitions: self._assigned(partitions),
            on_revoke=lambda _, partitions: self._revoked(partitions),
            on_lost=lambda _, partitions: self._revoked(partitions, lost=True),
        )

    def _start_over(self, reason: StreamsError, pause_s: float = 0.0) -> None:
        """Do in place what a restart with the same ``--instance-id`` does after ``reason``
        (a transaction whose outcome is unknown, a restore that timed out): every store is
        closed without a checkpoint (the changelog says what was committed), the group is
        left, ``pause_s`` is waited, a new producer's ``init_transactions`` completes or
        aborts any transaction left open (retried until the broker answers, or
        :meth:`stop`), and the group is joined again, whose assignment restores each
        partition in full."""
        later = f"in {pause_s:.0f} s, " if pause_s else ""
        log.warning("%s; starting over in place %sonce Kafka answers", reason, later)
        held = [TopicPartition(t, p) for p in self._held.stores for t in self.app.input_topics]
        self._revoked(held, lost=True)  # every store closed, none leaves a checkpoint
        try:
            self._consumer.close()
        except KafkaException as e:
            log.debug("closing the consumer: %s", e.args[0].str())
        self._consumer = self._new_consumer()
        if not self.stop_event.wait(pause_s) and self._renew_until_answered():
            self._subscribe()
            self.stats.restarts += 1

    def _renew_until_answered(self) -> bool:
        """A new producer with transactions initialised; ``False`` if :meth:`stop` came first."""
        backoff = 1.0
        while True:
            try:
                self._replace_producer()
                return True
            except KafkaException as e:
                if txn.classify(e.args[0]) in (txn.Failure.FENCED, txn.Failure.FATAL):
                    raise txn.translate(e, self.who, "initialising transactions") from e
                log.warning("initialising transactions: %s; trying again", e.args[0].str())
            if self.stop_event.wait(backoff):
                return False
            backoff = min(backoff * 2, 30.0)

    def _assigned(self, partitions: Sequence[TopicPartition]) -> None:
        held = set(self._held.stores)
        self._held.assign(self._consumer, partitions, self.stats)
        self._restore_retry_s = RESTORE_RETRY_S[0]
        if self.effects is not None:
            self.effects.assigned({tp.partition for tp in partitions})
            for partition in sorted(set(self._held.stores) - held):
                self.effects.restored(partition, self._held.stores[partition])

    def _revoked(self, partitions: Sequence[TopicPartition], lost: bool = False) -> None:
        if self.effects is not None:
            self.effects.revoked({tp.partition for tp in partitions})
        self._held.revoke(partitions, self.stats, lost=lost)

    def _close(self) -> None:
        if self.effects is not None:
            self.effects.close()
        try:
            self._consumer.close()
        finally:
            self._held.close()
            self._held.restorer.close()
            try:
                self._producer.flush(5)
            except KafkaException as e:
                # Already failed (e.g. fenced): the error that stopped us is the one to report.
                log.debug("flush on close: %s", e.args[0].str())
        log.info("processor %s stopped", self.who)

    # -- one batch -------------------------------------------------------------------------

    def step(self) -> None:
        """Consume one batch and commit it (or nothing, if there was nothing to do)."""
        # Something is due at once (a step a decision left due now, or an effect's answer):
        # take what has arrived and go on rather than wait a commit interval for more.
        waiting = self._decider.hurry or (self.effects is not None and self.effects.pending())
        self._decider.hurry = False
        messages = take(self._consumer, self._budget, 0 if waiting else self.commit_interval_s)
        inputs = [i for i in (read(self.app, m, self._held.stores) for m in messages) if i]
        self.app.prepare([i.record for i in inputs if i.record is not None], self.clock())
        now = self.clock()
        items: list[Input | Timer | Answer] = [
            Timer(partition, timer, key)
            for partition, store in sorted(self._held.stores.items())
            for timer, key in store.due_timers(now, self.timer_batch)
        ]
        answers = self.effects.take() if self.effects is not None else []
        items.extend(answers)
        items.extend(inputs)
        if not items:
            return
        counts = self._held.count_check() if inputs else None
        try:
            decided = self._decide(items, now, adapt=True, counts=counts)
            if not decided and self.effects is not None:
                self.effects.requeue(answers)
        except txn.Unrecordable as e:
            if counts is not None:
                self._held.verify_counts(counts)
            self._isolate(items, now, str(e))

    def _decide(
        self,
        items: Sequence[Item],
        now: int,
        *,
        adapt: bool = False,
        counts: Future[dict[str, int]] | None = None,
    ) -> bool:
        """Commit ``items`` in one transaction, deciding them again in place if it aborted;
        ``False`` if it still failed (the consumer was then rewound to the committed offsets,
        so they are consumed and decided again)."""
        for attempt in range(IN_PLACE_ATTEMPTS):
            outcome = self._transact(items, now, adapt=adapt, counts=counts)
            if outcome is _Outcome.COMMITTED:
                return True
            if outcome in (_Outcome.STALE, _Outcome.EXPIRED):
                # Every transaction fails until the rebalance that is coming, whose
                # assignment positions the consumer anyway: a failed seek is harmless here.
                try:
                    self._held.rewind(self._consumer)
                except TransactionUnresolved as e:
                    log.warning("%s (the coming rebalance repositions it)", e)
                return False
            time.sleep(0.1 * 2**attempt)
        self._held.rewind(self._consumer)
        return False

    def _transact(
        self,
        items: Sequence[Item],
        now: int,
        *,
        adapt: bool,
        counts: Future[dict[str, int]] | None,
    ) -> _Outcome:
        """Decide ``items`` in one transaction; with ``counts``, verified before the commit.

        Raises :class:`~streams.engine.transactions.Unrecordable` (already aborted) when a
        record of it can never be produced.
        """
        began = time.monotonic()
        deadline = began + self._deadline_s
        try:
            self._producer.begin_transaction()
        except KafkaException as e:
            raise txn.translate(e, self.who, "beginning a transaction") from e
        collect = self.effects is not None or bool(self._failpoints)
        self._decider.produced = [] if collect else None
        try:
            events = sum(self._decider.apply(item, now) for item in items)
            self._held.record_partition_count()
            for partition, store in self._held.stores.items():
                for store_key, value in store.pending().items():
                    self._produce(self.app.changelog_topic, store_key, value, partition)
            worked = time.monotonic()
            offsets = self._held.offsets_after(items)
            positions = [TopicPartition(t, p, o) for (t, p), o in offsets.items()]
            metadata = self._consumer.consumer_group_metadata()
            txn.send_offsets(self._producer, positions, metadata, deadline)
            if counts is not None:
                self._held.verify_counts(counts)
            if self._failpoints:
                # The point promises the records were sent; linger may still hold some.
                self._producer.flush(max(deadline - time.monotonic(), 0.0))
                self._failpoints.check("before_commit", self._decided_events())
            txn.commit(self._producer, deadline)
        except KafkaException as e:
            return self._failed(e, began, deadline)
        except txn.Unrecordable:
            self._held.discard()
            txn.abort(self._producer, deadline, self.who)
            self.stats.aborts += 1
            raise
        except TransactionUnresolved:
            self._held.discard()
            raise
        except BaseException:
            # A bug in decide/evolve or a codec error: nothing of this batch may leave.
            self._held.discard()
            self._abort_quietly(deadline)
            raise
        self._held.committed(offsets)
        if self._failpoints:
            self._failpoints.check("after_commit", self._decided_events())
        if self.effects is not None and self._decider.produced:
            self.effects.submit(self._decider.produced)
        if adapt:
            self._budget = next_budget(
                self._rule,
                current=self._budget,
                handled=len(items),
                work_s=worked - began,
                commit_s=time.monotonic() - worked,
            )
        self.stats.count(items, events)
        return _Outcome.COMMITTED

    def _decided_events(self) -> list[object]:
        return [e for _, _, events in self._decider.produced or () for e in events]

    def _failed(self, e: KafkaException, began: float, deadline: float) -> _Outcome:
        err = e.args[0]
        failure = txn.classify(err)
        self._held.discard()
        # A fence is another producer with this transactional id, or the broker's own doing:
        # it aborts a transaction older than its timeout and bumps the producer's epoch. Only
        # a transaction this old can have met the second, so only then is it not a rival.
        expired = time.monotonic() - began > self._timeout_s
        if failure is txn.Failure.FENCED and expired:
            return self._renew_producer(err.str(), began)
        if failure in (txn.Failure.FENCED, txn.Failure.FATAL):
            self._abort_quietly(deadline)
            raise txn.translate(e, self.who, "committing a batch") from e
        try:
            txn.abort(self._producer, deadline, self.who)
        except ProcessorFenced as fenced:
            if not expired:
                raise
            return self._renew_producer(str(fenced), began)
        self.stats.aborts += 1
        if failure is txn.Failure.UNRECORDABLE:
            raise txn.Unrecordable(txn.describe(err)) from e
        if err.code() in txn.STALE_GENERATION_CODES:
            log.warning("aborted: this instance's group generation is stale (%s)", err.str())
            return _Outcome.STALE
        log.warning("aborted the batch: %s", err.str())
        return _Outcome.ABORTED

    def _replace_producer(self) -> None:
        """A new producer with this transactional id in place of the current one, which can
        write nothing more (what it still queues is purged); its ``init_transactions``
        completes or aborts whatever transaction the id has open. Raises its
        ``KafkaException``."""
        with contextlib.suppress(KafkaException):
            self._producer.purge()
        self._producer = self._new_producer()
        self._producer.init_transactions(30)

    def _renew_producer(self, reason: str, began: float) -> _Outcome:
        """Replace the producer the broker fenced for outliving its transaction timeout.

        The process was stopped or starved (SIGSTOP, a frozen VM, swap) while a transaction
        was open: the broker has aborted it, so nothing of it is visible, and the buffered
        state is already discarded. The fenced producer can do nothing more; a new one with
        the same transactional id takes the next epoch, and the caller rewinds the consumer
        (or the rebalance the lost group session brings repositions it).
        """
        log.warning(
            "the transaction was open %.1f s, past its %.0f s timeout (was this process "
            "stopped or starved?): the broker aborted it (%s); renewing the producer",
            time.monotonic() - began,
            self._timeout_s,
            reason,
        )
        try:
            self._replace_producer()
        except KafkaException as e:
            if txn.classify(e.args[0]) in (txn.Failure.FENCED, txn.Failure.FATAL):
                raise txn.translate(e, self.who, "initialising transactions again") from e
            # The broker went away meanwhile: starting over retries until it answers.
            raise TransactionUnresolved(
                f"initialising transactions again did not complete ({e.args[0].str()})"
            ) from e
        self.stats.aborts += 1
        self.stats.producers_renewed += 1
        return _Outcome.EXPIRED

    def _isolate(self, items: Sequence[Input | Timer | Answer], now: int, reason: str) -> None:
        """Decide ``items`` in parts until the records that can never be produced stand alone,
        and give each of those an explicit outcome of its own."""
        log.warning(
            "a batch of %d cannot be recorded (%s); isolating the record", len(items), reason
        )
        queue = list(items)
        size = len(queue) // 2 or 1
        while queue:
            part = queue[:size]
            try:
                if not self._decide(part, now):
                    return  # rewound: the rest is consumed (and isolated) again
            except txn.Unrecordable as e:
                if size > 1:
                    size //= 2
                    continue
                self._record_unrecordable(part[0], now, str(e))
                queue = queue[1:]
                size = len(queue)
                continue
            queue = queue[size:]
            size = len(queue)

    def _record_unrecordable(self, item: Input | Timer | Answer, now: int, reason: str) -> None:
        for bare in (False, True):
            try:
                if self._decide([Isolated(item, reason, bare)], now):
                    log.error("isolated %s: %s", item.origin(), reason)
                return
            except txn.Unrecordable as e:
                reason = f"{reason}; its outcome too: {e}"
        # Not even a dead letter without the bytes could be written: skip it, loudly.
        log.error("%s could not be recorded at all (%s); skipped", item.origin(), reason)
        self._decide([Isolated(item, reason, bare=True, silent=True)], now)

    # -- producing -------------------------------------------------------------------------

    def _produce(
        self,
        topic: str,
        key: str,
        value: bytes | None,
        partition: int | None,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> None:
        encoded = key.encode()
        chosen = _ANY_PARTITION if partition is None else partition
        while True:
            try:
                # Positional: this runs for every event and changelog record.
                if headers:
                    self._producer.produce(topic, value, encoded, chosen, headers=list(headers))
                else:
                    self._producer.produce(topic, value, encoded, chosen)
                return
            except BufferError:
                self._producer.poll(0.05)
            except KafkaException as e:
                if txn.classify(e.args[0]) is txn.Failure.UNRECORDABLE:
                    raise txn.Unrecordable(f"{txn.describe(e.args[0])} ({topic})") from e
                raise

    # -- errors ----------------------------------------------------------------------------

    def _abort_quietly(self, deadline: float) -> None:
        try:
            txn.abort(self._producer, deadline, self.who)
        except (KafkaException, TransactionUnresolved, ProcessorFenced, FatalKafkaError) as e:
            log.debug("abort after a failure: %s", e)
