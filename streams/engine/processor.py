"""The exactly-once consume-decide-produce loop (Kafka EOS v2 on confluent-kafka).

One transactional producer per instance, one read_committed consumer in the app's group
(range assignment, so the co-partitioned input topics land together), one state store per
input partition number, backed by a compacted changelog written in the same transaction.

Commit order, per batch (this order is the whole exactly-once argument):

1. consume a batch (outside any transaction; rebalance callbacks run only here): whatever
   has arrived, up to the budget, waiting only while nothing has; a partition whose
   position left the topic's range is assigned again at its start, and the records it
   lost are an item of the batch (``gaps.py``), so step 6 commits their dead letter with
   the offset past them;
2. ``prepare`` the app (may block: lookups happen before the transaction opens); if the batch
   has records, start reading the input topics' partition counts and topic ids (on a helper
   thread, so the round trips overlap steps 3 to 5);
3. begin the transaction; fire due timers, then decide each record; produce the events;
4. produce the changelog records of every state the batch changed (explicit partition = the
   input partition), ``m/partitions`` once per changelog partition, ``m/offsets`` (the
   input positions after this batch, ``positions.py``) for every partition it advances, and
   ``m/topic-ids`` (the topics those positions are in) once per assignment that changes them;
5. ``send_offsets_to_transaction`` with the consumer group metadata and the offsets of
   *every* assigned partition (those the batch advanced, the committed ones otherwise), so
   every transaction, timer-only ones included, is fenced: a zombie whose group generation
   is stale cannot commit anything; then wait for the check of step 2: a count that
   differs from the one the state was restored with (changed by hand) aborts the
   transaction and stops the instance, so nothing decided with moved keys is committed,
   and a topic id that changed (the topic deleted and created again) aborts it and starts
   the instance over, whose assignment reads the new topic from its start;
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

Errors and poison records (``transacting.py``): a transaction that failed is decided again
in place, or rewound so that its records are consumed and decided again; nothing ever
commits offsets past an undecided record. A record that can never be produced is isolated
and given an explicit outcome of its own. A fence or a fatal error stops the instance,
except the broker's own fence of a transaction that outlived its timeout (the process was
stopped or starved), after which the producer is replaced and the batch rewound.

Starting over (:meth:`Processor._start_over`): what no batch can settle does not stop the
instance. A transaction whose outcome is unknown (:class:`~streams.errors.TransactionUnresolved`:
a commit or abort that cannot complete, Kafka out of reach for longer than the transaction
timeout, say) and a restore that cannot finish within its bound
(:class:`~streams.errors.RestoreTimedOut`; 1 s later, doubling while it keeps failing) make
it do in place what a restart with the same id would: stores closed without checkpoints
(but those a timed-out assignment had finished restoring, which keep one: ``assignment.py``),
the group left, a new producer initialised once the broker answers (``clients.py``), the
group joined again and every partition restored. A consumer the broker fenced as a static
member (:class:`~streams.errors.ConsumerFailed`, which a broker restart can cause) is
replaced the same way, producer kept (:meth:`Processor._rejoin`); fenced again within a
minute, it was another live instance with this id, and the instance stops.

Assignment (``restore.py``): partition counts are checked, committed offsets are read stable,
each partition's store is restored from its changelog to the true end, and the consumer is
assigned at exactly those offsets, unless the restored state records positions past them
(``positions.py``: every transaction writes its input positions into the changelog beside
the state, so offsets the group lost are no reason to decide anything twice), and only in
the topic they were read in (a topic created again since is read from its start, the move a
dead letter). On revocation the stores are closed (no transaction is ever open during a
rebalance, see 1); a clean revoke leaves a checkpoint of the changelog position each store
reflects (``checkpoint.py``), so taking the partition back reads only what the store
lacks. Lost partitions and an instance stopping on an error leave none.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Generic, TypeVar

from confluent_kafka import KafkaException, TopicPartition

from schemas.topics import DEAD_LETTERS
from streams.clock import wall_clock_ms
from streams.engine import failpoints, lag
from streams.engine import transactions as txn
from streams.engine.app import StreamApp
from streams.engine.assignment import Assignment
from streams.engine.batch import Answer, Expired, Input, ProcessorStats, Stopped, Timer, read
from streams.engine.clients import Clients
from streams.engine.effects import EffectRunner, is_effectful
from streams.engine.gaps import resume_stopped
from streams.engine.instance_lock import InstanceLock
from streams.engine.restore import RESTORE_MARGIN_S, Restorer
from streams.engine.status import InstanceStatus, Phase
from streams.engine.transacting import Transactor
from streams.errors import (
    ConsumerFailed,
    InputTopicRecreated,
    ProcessorFenced,
    RestoreTimedOut,
    StreamsError,
    TransactionUnresolved,
)
from streams.kafka.consuming import take
from streams.settings import Settings

log = logging.getLogger("sluicegate.processor")

S = TypeVar("S")
C = TypeVar("C")
E = TypeVar("E")

RESTORE_RETRY_S = (1.0, 30.0)
"""After a restore that timed out, the processor starts over this long later: the first
pause, doubled on each failure in a row up to the second (reset by an assignment that
restores)."""

REJOIN_FENCED_AGAIN_S = 60.0
"""A consumer fenced again this soon after the instance rejoined with a new one means another
live instance has this id: the instance stops instead of fencing it back."""

STALLED_AFTER_S = 60.0
"""A running instance whose loop has not come round for this long (or three transaction
timeouts, if longer) is reported unhealthy: no step of a working loop takes that long."""


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
        self.status = InstanceStatus(
            stalled_after_s=max(STALLED_AFTER_S, 3 * transaction_timeout_ms / 1000)
        )
        """What the instance is doing now (``status.py``), for an operator's probes."""
        group = f"{settings.topic_prefix}{app.name}"
        self._clients = Clients(
            settings,
            name=app.name,
            instance_id=instance_id,
            group=group,
            transaction_timeout_ms=transaction_timeout_ms,
            commit_interval_ms=commit_interval_ms,
            static_membership=static_membership,
        )
        restorer = Restorer(
            settings,
            f"{group}-restore-{instance_id}",
            bound_s=transaction_timeout_ms / 1000 + RESTORE_MARGIN_S,
        )
        directory = Path(settings.state_dir) / app.name / instance_id
        self._lock = InstanceLock(directory, self.who)
        self._held = Assignment(
            restorer, app.input_topics, app.changelog_topic, directory, self.who
        )
        armed = failpoints.from_env()
        self.effects: EffectRunner | None = None
        if is_effectful(app):
            self.effects = EffectRunner(app, clock, armed, app.effect_threads)
        self._transactor = Transactor(
            app,
            self._clients,
            self._held,
            self.stats,
            who=self.who,
            dead_letters=settings.topic(DEAD_LETTERS),
            batch_size=batch_size,
            commit_interval_s=self.commit_interval_s,
            transaction_timeout_ms=transaction_timeout_ms,
            failpoints=armed,
            effects=self.effects,
        )
        self._restore_retry_s = RESTORE_RETRY_S[0]
        self._lag_due = 0.0
        self._rejoined_at: float | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def run(self) -> None:
        """Process until :meth:`stop` is called or a fatal error/fence raises.

        Kafka out of reach for longer than a transaction can wait (its commit or abort cannot
        complete: :class:`~streams.errors.TransactionUnresolved`) does not end it, nor does a
        restore that cannot finish in time (:class:`~streams.errors.RestoreTimedOut`: the
        broker away, or a transaction held open on the partition), nor an input topic created
        again while held (:class:`~streams.errors.InputTopicRecreated`): it starts over in
        place (:meth:`_start_over`), after a restore's failure a back-off later
        (:data:`RESTORE_RETRY_S`), and goes on once the broker answers. Started while the
        broker does not answer, it waits for it (``starting``) the same way; :meth:`stop`
        ends any of these waits. A consumer the broker fenced is replaced (:meth:`_rejoin`).
        """
        try:
            # Before the producer: its init_transactions would fence the instance that
            # holds the lock (instance_lock.py).
            self._lock.acquire()
            answered = self._clients.init_producer_once_answered(self.stop_event)
        except StreamsError as e:  # running already, fenced or fatal: no retry can help
            self.status.enter(Phase.STOPPED, f"{type(e).__name__}: {e}")
            self._lock.release()
            raise
        if not answered:  # stopped while the broker did not answer
            self.status.enter(Phase.STOPPED)
            self._close()
            return
        self._subscribe()
        log.info("processor %s started", self.who)
        try:
            while not self.stop_event.is_set():
                try:
                    self.step()
                except (TransactionUnresolved, InputTopicRecreated) as e:
                    self._start_over(e)
                except RestoreTimedOut as e:
                    pause_s = self._restore_retry_s
                    self._restore_retry_s = min(pause_s * 2, RESTORE_RETRY_S[1])
                    self._start_over(e, pause_s=pause_s)
                except ConsumerFailed as e:
                    self._rejoin(e)
        except BaseException as e:
            self._held.checkpoints = False  # a transaction's outcome may be unknown
            self.status.enter(Phase.STOPPED, f"{type(e).__name__}: {e}")
            raise
        finally:
            self.status.enter(Phase.STOPPED)
            self._close()

    def stop(self) -> None:
        self.stop_event.set()

    def _subscribe(self) -> None:
        self._clients.consumer.subscribe(
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
        partition in full. The stores an assignment finished restoring before another
        partition's restore timed out were closed before this, with checkpoints
        (``assignment.py``), and are not restored again."""
        later = f"in {pause_s:.0f} s, " if pause_s else ""
        log.warning("%s; starting over in place %sonce Kafka answers", reason, later)
        self._leave_group(reason)
        stop = self.stop_event
        if not stop.wait(pause_s) and self._clients.replace_producer_once_answered(stop):
            self._subscribe()
            self.stats.restarts += 1

    def _rejoin(self, reason: ConsumerFailed) -> None:
        """Join the group again with a new consumer after the broker fenced this one
        (``reason``), keeping the producer: no transaction is open while the consumer polls.
        The stores are closed and restored as in :meth:`_start_over`.

        Fenced again within :data:`REJOIN_FENCED_AGAIN_S` of rejoining, the instance stops
        with :class:`~streams.errors.ProcessorFenced`: another live instance has this id.
        Rejoining fenced its consumer in turn, which rejoins once and so fences this one
        again, so of the two the one started later goes on (as a fence of its producer
        alone would have it)."""
        now = time.monotonic()
        if self._rejoined_at is not None and now - self._rejoined_at < REJOIN_FENCED_AGAIN_S:
            raise ProcessorFenced(
                f"{self.who}: the consumer was fenced again {now - self._rejoined_at:.0f} s "
                f"after rejoining ({reason}): another live instance has this instance id; "
                "stopping this one"
            ) from reason
        log.warning("%s; the consumer cannot go on: joining the group again", reason)
        self._leave_group(reason)
        self._subscribe()
        self._rejoined_at = now
        self.stats.restarts += 1

    def _leave_group(self, reason: StreamsError) -> None:
        """Close every store without a checkpoint (the changelog says what was committed) and
        replace the consumer with one not yet subscribed."""
        self.status.enter(Phase.STARTING_OVER, f"{type(reason).__name__}: {reason}")
        held = [TopicPartition(t, p) for p in self._held.stores for t in self.app.input_topics]
        self._revoked(held, lost=True)
        self._clients.replace_consumer()

    def _assigned(self, partitions: Sequence[TopicPartition]) -> None:
        held = set(self._held.stores)
        self.status.enter(Phase.RESTORING)
        self._held.assign(self._clients.consumer, partitions, self.stats)
        self.status.holding(tuple(self.stats.assigned))
        self.status.enter(Phase.RUNNING)
        self._restore_retry_s = RESTORE_RETRY_S[0]
        if self.effects is not None:
            self.effects.assigned({tp.partition for tp in partitions})
            for partition in sorted(set(self._held.stores) - held):
                self.effects.restored(partition, self._held.stores[partition])

    def _revoked(self, partitions: Sequence[TopicPartition], lost: bool = False) -> None:
        if self.effects is not None:
            self.effects.revoked({tp.partition for tp in partitions})
        self._held.revoke(partitions, self.stats, lost=lost)
        self.status.holding(tuple(self.stats.assigned))

    def _close(self) -> None:
        try:
            if self.effects is not None:
                self.effects.close()
            try:
                self._clients.consumer.close()
            finally:
                self._held.close()
                self._held.restorer.close()
                try:
                    self._clients.producer.flush(5)
                except KafkaException as e:
                    # Already failed (e.g. fenced): the error that stopped us is the one to
                    # report.
                    log.debug("flush on close: %s", e.args[0].str())
        finally:
            self._lock.release()  # every store closed (or given up): another may open them
        log.info("processor %s stopped", self.who)

    # -- one batch -------------------------------------------------------------------------

    def step(self) -> None:
        """Consume one batch and commit it (or nothing, if there was nothing to do)."""
        self.status.came_round()
        if (moment := time.monotonic()) >= self._lag_due:
            self._lag_due = moment + lag.SAMPLE_EVERY_S
            self.status.lagging(lag.sample(self._clients.consumer, self._held.offsets))
        # Something is due at once (a step a decision left due now, or an effect's answer):
        # take what has arrived and go on rather than wait a commit interval for more.
        batches = self._transactor
        waiting = batches.decider.hurry or (self.effects is not None and self.effects.pending())
        batches.decider.hurry = False
        wait_s = 0 if waiting else self.commit_interval_s
        messages = take(self._clients.consumer, batches.budget, wait_s)
        stopped: list[Stopped] = []
        taken = [i for i in (read(self.app, m, self._held.stores, stopped) for m in messages) if i]
        self.app.prepare([i.record for i in taken if i.record is not None], self.clock())
        inputs: Sequence[Input | Expired] = taken
        moved = self._held.take_moved()
        if moved:  # each move to a topic created again before the records read from there
            inputs = [*moved, *taken]
        if stopped:  # each gap after its partition's last record, which precedes the stop
            at = self._held.offsets_after(taken)
            inputs = [*inputs, *resume_stopped(self._clients.consumer, stopped, at)]
        now = self.clock()
        items: list[Input | Expired | Timer | Answer] = [
            Timer(partition, timer, key)
            for partition, store in sorted(self._held.stores.items())
            for timer, key in store.due_timers(now, self.timer_batch)
        ]
        answers = self.effects.take() if self.effects is not None else []
        items.extend(answers)
        items.extend(inputs)
        if not items:
            return
        check = self._held.input_check() if inputs else None
        try:
            decided = batches.decide(items, now, adapt=True, check=check)
            if not decided and self.effects is not None:
                self.effects.requeue(answers)
        except txn.Unrecordable as e:
            if check is not None:
                self._held.verify_inputs(check)
            batches.isolate(items, now, str(e))
