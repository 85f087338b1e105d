"""One batch decided in one transaction: steps 3 to 6 of the commit order
(``processor.py``), what a failed transaction leads to, and the isolation of poison records.

Errors (``transactions.py``): an abortable error aborts and discards the buffered state;
the batch is decided again in place from the same state (a few times: the transaction right
after an abort often fails too while the producer bumps its epoch), and if it still fails,
every assigned partition is sought back to its committed offset so the batch is consumed
and decided again. Nothing ever commits offsets past an undecided record.

A fence or a fatal error is raised (the instance stops), except the broker's own fence: a
transaction that outlived its timeout (the process was stopped or starved) is aborted by
the broker, which bumps the producer's epoch; the producer is then replaced (same
transactional id) and the consumer rewound as after a stale generation. A seek that still
fails, an abort librdkafka refuses, a commit that never completes and a replacement the
broker does not answer leave the outcome unknown:
:class:`~streams.errors.TransactionUnresolved` is raised for the processor to start over.

Poison records: when a record can never be produced (``MSG_SIZE_TOO_LARGE``: an event or a
state over ``message.max.bytes``), the transaction is aborted and the batch is decided again
in parts (the first half, then the rest, halving on each failure) until a single record
fails alone. That record gets its own transaction with an explicit outcome: a dead letter
with the reason and its original bytes, plus the app's :meth:`StreamApp.undecidable` events
(falling back to a dead letter without the bytes). The other records are decided normally.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Generic, TypeVar

from confluent_kafka import KafkaException, TopicPartition

from streams.engine import transactions as txn
from streams.engine.app import StreamApp
from streams.engine.assignment import Assignment
from streams.engine.batch import Answer, Expired, Input, Isolated, Item, ProcessorStats, Timer
from streams.engine.budget import BatchBudget, next_budget
from streams.engine.clients import Clients
from streams.engine.deciding import Decider
from streams.engine.effects import EffectRunner
from streams.engine.failpoints import Failpoints
from streams.engine.restore import Inputs
from streams.errors import (
    FatalKafkaError,
    KafkaUnavailable,
    ProcessorFenced,
    TransactionUnresolved,
)

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


class _Outcome(enum.Enum):
    COMMITTED = "committed"
    ABORTED = "aborted"
    STALE = "stale"  # aborted: this instance's group generation is stale
    EXPIRED = "expired"  # the broker aborted it past its timeout; the producer was renewed


class Transactor(Generic[S, C, E]):
    """Decides batches of one processor instance, each in one transaction, on its
    :class:`~streams.engine.clients.Clients` and for the partitions it holds."""

    def __init__(
        self,
        app: StreamApp[S, C, E],
        clients: Clients,
        held: Assignment,
        stats: ProcessorStats,
        *,
        who: str,
        dead_letters: str,
        batch_size: int,
        commit_interval_s: float,
        transaction_timeout_ms: int,
        failpoints: Failpoints,
        effects: EffectRunner | None,
    ) -> None:
        self.app = app
        self.who = who
        self.stats = stats
        self.effects = effects
        self._clients = clients
        self._held = held
        self._failpoints = failpoints
        # Records per transaction: sized so that deciding a batch takes about one commit
        # interval (budget.py); consumption never happens while a transaction is open.
        self._rule = BatchBudget(commit_interval_s, min(_MIN_BATCH, batch_size), batch_size)
        self.budget = batch_size
        self._timeout_s = transaction_timeout_ms / 1000
        self._deadline_s = self._timeout_s + _COMMIT_MARGIN_S
        self.decider = Decider(
            app, held.stores, dead_letters, self.produce, lambda: held.partitions
        )

    def decide(
        self,
        items: Sequence[Item],
        now: int,
        *,
        adapt: bool = False,
        check: Future[Inputs] | None = None,
    ) -> bool:
        """Commit ``items`` in one transaction, deciding them again in place if it aborted;
        ``False`` if it still failed (the consumer was then rewound to the committed offsets,
        so they are consumed and decided again)."""
        for attempt in range(IN_PLACE_ATTEMPTS):
            outcome = self._transact(items, now, adapt=adapt, check=check)
            if outcome is _Outcome.COMMITTED:
                return True
            if outcome in (_Outcome.STALE, _Outcome.EXPIRED):
                # Every transaction fails until the rebalance that is coming, whose
                # assignment positions the consumer anyway: a failed seek is harmless here.
                try:
                    self._held.rewind(self._clients.consumer)
                except TransactionUnresolved as e:
                    log.warning("%s (the coming rebalance repositions it)", e)
                return False
            time.sleep(0.1 * 2**attempt)
        self._held.rewind(self._clients.consumer)
        return False

    def _transact(
        self,
        items: Sequence[Item],
        now: int,
        *,
        adapt: bool,
        check: Future[Inputs] | None,
    ) -> _Outcome:
        """Decide ``items`` in one transaction; with ``check``, verified before the commit.

        Raises :class:`~streams.engine.transactions.Unrecordable` (already aborted) when a
        record of it can never be produced.
        """
        began = time.monotonic()
        deadline = began + self._deadline_s
        try:
            self._clients.producer.begin_transaction()
        except KafkaException as e:
            raise txn.translate(e, self.who, "beginning a transaction") from e
        collect = self.effects is not None or bool(self._failpoints)
        self.decider.produced = [] if collect else None
        self.decider.forwarded = 0
        try:
            events = sum(self.decider.apply(item, now) for item in items)
            offsets = self._held.offsets_after(items)
            self._held.record_meta()
            self._held.record_positions(offsets)
            for partition, store in self._held.stores.items():
                for store_key, value in store.pending().items():
                    self.produce(self.app.changelog_topic, store_key, value, partition)
            worked = time.monotonic()
            positions = [TopicPartition(t, p, o) for (t, p), o in offsets.items()]
            metadata = self._clients.consumer.consumer_group_metadata()
            txn.send_offsets(self._clients.producer, positions, metadata, deadline)
            if check is not None:
                self._held.verify_inputs(check)
            if self._failpoints:
                # The point promises the records were sent; linger may still hold some.
                self._clients.producer.flush(max(deadline - time.monotonic(), 0.0))
                self._failpoints.check("before_commit", self._decided_events())
            txn.commit(self._clients.producer, deadline)
        except KafkaException as e:
            return self._failed(e, began, deadline)
        except txn.Unrecordable:
            self._held.discard()
            txn.abort(self._clients.producer, deadline, self.who)
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
        if self.effects is not None and self.decider.produced:
            self.effects.submit(self.decider.produced)
        if adapt:
            self.budget = next_budget(
                self._rule,
                current=self.budget,
                handled=len(items),
                work_s=worked - began,
                commit_s=time.monotonic() - worked,
            )
        self.stats.count(items, events)
        self.stats.forwarded += self.decider.forwarded
        return _Outcome.COMMITTED

    def _decided_events(self) -> list[object]:
        return [e for _, _, events in self.decider.produced or () for e in events]

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
            txn.abort(self._clients.producer, deadline, self.who)
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
            self._clients.replace_producer()
        except KafkaUnavailable as e:
            # The broker went away meanwhile: starting over retries until it answers.
            raise TransactionUnresolved(f"renewing the producer: {e}") from e
        self.stats.aborts += 1
        self.stats.producers_renewed += 1
        return _Outcome.EXPIRED

    def isolate(
        self, items: Sequence[Input | Expired | Timer | Answer], now: int, reason: str
    ) -> None:
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
                if not self.decide(part, now):
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

    def _record_unrecordable(
        self, item: Input | Expired | Timer | Answer, now: int, reason: str
    ) -> None:
        for bare in (False, True):
            try:
                if self.decide([Isolated(item, reason, bare)], now):
                    log.error("isolated %s: %s", item.origin(), reason)
                return
            except txn.Unrecordable as e:
                reason = f"{reason}; its outcome too: {e}"
        # Not even a dead letter without the bytes could be written: skip it, loudly.
        log.error("%s could not be recorded at all (%s); skipped", item.origin(), reason)
        self.decide([Isolated(item, reason, bare=True, silent=True)], now)

    def produce(
        self,
        topic: str,
        key: str,
        value: bytes | None,
        partition: int | None,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> None:
        """Produce one record in the open transaction (waiting while the queue is full);
        :class:`~streams.engine.transactions.Unrecordable` if it can never be produced."""
        encoded = key.encode()
        chosen = _ANY_PARTITION if partition is None else partition
        producer = self._clients.producer
        while True:
            try:
                # Positional: this runs for every event and changelog record.
                if headers:
                    producer.produce(topic, value, encoded, chosen, headers=list(headers))
                else:
                    producer.produce(topic, value, encoded, chosen)
                return
            except BufferError:
                producer.poll(0.05)
            except KafkaException as e:
                if txn.classify(e.args[0]) is txn.Failure.UNRECORDABLE:
                    raise txn.Unrecordable(f"{txn.describe(e.args[0])} ({topic})") from e
                raise

    def _abort_quietly(self, deadline: float) -> None:
        try:
            txn.abort(self._clients.producer, deadline, self.who)
        except (KafkaException, TransactionUnresolved, ProcessorFenced, FatalKafkaError) as e:
            log.debug("abort after a failure: %s", e)
