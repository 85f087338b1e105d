"""The branch-worker SDK: take branch tasks, run a handler, report the result.

A worker consumes ``tasks`` (``BranchLaunched`` / ``BranchRelaunched``) for the slots it
serves and reports ``ReportBranchStarted`` and then ``ReportBranchCompleted``,
``ReportBranchFailed`` or ``ReportBranchSkipped`` to ``branch-results``, keyed by admission
key, so the report lands on the partition that holds its run. These are claims: the processor
accepts each once per (run, slot) and writes the fact (``BranchCompleted``, ...) to ``runs``.

What a handler sees and returns, and when a task's deadline is checked, is the task
contract of ``branch_tasks.py`` (its names are re-exported here). Guarantees and limits of
the worker:

* At-least-once: offsets are committed only after the reports of a turn were acknowledged
  (commit order: handle -> produce reports -> flush -> commit offsets, once per turn, and
  for the partitions a rebalance takes away, before they go). A turn takes up to 200 tasks
  and ends early once its handlers have run 5 s (the tasks it did not reach are sought back
  to and taken by the next turn), so a crash repeats at most that turn's tasks, one task if
  each handler takes 5 s or more. The processor counts each (run, slot) result once, so a
  repeat is harmless to the run, but a handler with external effects must itself be
  idempotent per (run_id, slot), for example by keying its writes on them.
* A handler may run longer than the consumer's ``max.poll.interval.ms``: once one has run
  :data:`KEEP_POLLING_AFTER_S`, a helper thread pauses the worker's partitions and polls
  until it returns (``keep_polling.py``), so the consumer stays in its group and no other
  worker takes the task meanwhile. A rebalance that starts meanwhile waits for the handler:
  the worker reports it and commits what the turn has done on the partitions it gives up,
  then lets them go (so the handler must end within the group's rebalance timeout,
  ``max.poll.interval.ms``, or the worker is dropped and the task repeats elsewhere).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence

from confluent_kafka import KafkaException, Message, TopicPartition

from consumers.branch_tasks import (
    EXPIRED_AT_DEQUEUE,
    RECORD_ONLY,
    BranchError,
    Handler,
    Proposal,
    Report,
    Skip,
    Task,
    checks_deadline,
    finish_task,
    take_task,
)
from consumers.demo_handler import demo_handler
from consumers.errors import ConsumersError
from consumers.keep_polling import KEEP_POLLING_AFTER_S, KeepPolling
from schemas.codec import decode, encode
from schemas.commands import ReportBranchStarted
from schemas.errors import SchemaError
from schemas.events import BranchLaunched, BranchRelaunched
from schemas.topics import BRANCH_RESULTS, TASKS
from streams.clock import wall_clock_ms
from streams.kafka.clients import idempotent_producer, read_committed_consumer
from streams.kafka.consuming import take
from streams.settings import Settings

__all__ = [
    "BATCH",
    "EXPIRED_AT_DEQUEUE",
    "KEEP_POLLING_AFTER_S",
    "RECORD_ONLY",
    "TURN_BUDGET_S",
    "BranchError",
    "BranchWorker",
    "Handler",
    "Proposal",
    "Report",
    "Skip",
    "Task",
    "checks_deadline",
    "demo_handler",
    "finish_task",
    "take_task",
]

log = logging.getLogger("sluicegate.worker")

BATCH = 200
"""Tasks taken at most per turn."""
TURN_BUDGET_S = 5.0
"""A turn that has handled tasks this long commits them and leaves the rest to the next."""


class BranchWorker:
    """Serves ``slots`` with ``handler``; one consumer group per worker ``group``."""

    def __init__(
        self,
        settings: Settings,
        handler: Handler,
        *,
        slots: Sequence[str] | None = None,
        deadline_slots: Sequence[str] | None = None,
        clock_uncertainty_ms: int = 0,
        group: str = "branch-workers",
        clock: Callable[[], int] = wall_clock_ms,
        name: str | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        consumer_tuning: Mapping[str, object] | None = None,
    ) -> None:
        self.handler = handler
        self.monotonic = monotonic
        self.slots = set(slots) if slots else None
        self.deadline_slots = set(deadline_slots) if deadline_slots is not None else None
        self.clock_uncertainty_ms = clock_uncertainty_ms
        self.clock = clock
        self.name = name or f"{socket.gethostname()}-{threading.get_ident()}"
        self.stop_event = threading.Event()
        self.handled = 0
        self.reports: Counter[str] = Counter(dict.fromkeys(REPORT_KINDS, 0))
        """Reports handed to the producer since the worker was made, by kind. Every kind is
        there from the start, so another thread may copy it while this one counts."""
        self.came_round_at = monotonic()
        """Monotonic time the worker last made progress: its loop came round or a handler
        returned (construction, before it runs)."""
        self._results = settings.topic(BRANCH_RESULTS)
        self._consumer = read_committed_consumer(
            settings,
            group_id=f"{settings.topic_prefix}{group}",
            tuning={"auto.offset.reset": "earliest", **(consumer_tuning or {})},
        )
        self._producer = idempotent_producer(settings, tuning={"linger.ms": 5})
        self._consumer.subscribe(
            [settings.topic(TASKS)],
            on_revoke=lambda _, partitions: self._revoked(partitions),
            on_lost=lambda _, partitions: self._lost(partitions),
        )
        self._keeper = KeepPolling(self._consumer, name=self.name)
        self._closed = False
        # The turn being played (step): its tasks, how many are done (reported), the
        # partitions a rebalance took from it, and the outcome of the handler that runs.
        self._turn: Sequence[Message] = ()
        self._done = 0
        self._gone: set[tuple[str | None, int]] = set()
        self._outcome: Report | None = None

    def run(self) -> None:
        """Play turns (:meth:`step`) until :meth:`stop`, then :meth:`close`."""
        try:
            while not self.stop_event.is_set():
                self.came_round_at = self.monotonic()
                self.step()
        finally:
            self.close()

    def stop(self) -> None:
        self.stop_event.set()

    def close(self) -> None:
        """Release what the worker holds; for a worker driven by :meth:`step` (:meth:`run`
        closes it when it returns). The helper thread ends, the consumer leaves its group at
        once (its partitions go to the other workers without waiting out the session
        timeout; what the last turn committed stays committed) and the reports still queued
        get up to 10 s to be acknowledged. Calling it again does nothing; the worker takes
        no more tasks."""
        if self._closed:
            return
        self._closed = True
        self._keeper.close()
        with self._keeper.lock:
            self._consumer.close()
        if self._producer.flush(10):
            log.warning("branch reports not acknowledged within 10 s of closing the worker")

    def __enter__(self) -> BranchWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def alive(self, now: float, stalled_after_s: float = 60.0) -> bool:
        """Whether the worker made progress within ``stalled_after_s``: its loop came round,
        or a handler returned (it counts after each task, not once per turn). A single
        handler that may take longer needs a larger limit (or no supervisor's liveness
        window)."""
        return now - self.came_round_at <= stalled_after_s

    def step(self, timeout_s: float = 0.2) -> int:
        """Handle one turn of tasks; return how many were handled.

        A turn takes up to :data:`BATCH` tasks and ends early once it has handled tasks for
        :data:`TURN_BUDGET_S`: the tasks it did not reach are taken again by the next turn
        (the consumer is sought back to them), and what it handled is committed now. So a
        crash repeats at most one turn's tasks however slow the handlers. Tasks of a
        partition a rebalance took away during the turn are left to its next owner.
        """
        with self._keeper.lock:
            self._turn = take(self._consumer, BATCH, timeout_s)
            self._done, self._gone, self._keeper.early = 0, set(), []
            try:
                return self._play()
            finally:
                # Nothing of a turn that ended (or broke off) is committed by a later rebalance.
                self._turn, self._done, self._outcome = (), 0, None

    def _play(self) -> int:
        started = self.monotonic()
        handled = 0
        for msg in self._turn:
            # came_round_at is when the last handled task ended.
            if handled and self.came_round_at - started >= TURN_BUDGET_S:
                break
            if not (self._gone and _where(msg) in self._gone) and self._take(msg):
                handled += 1
                self.came_round_at = self.monotonic()
            self._done += 1
        self._seek_back(self._kept(self._turn[self._done :]) + self._keeper.early)
        done = self._kept(self._turn[: self._done])
        if done:
            self._flush()
            self._commit(done)
        self.handled += handled
        return handled

    def _kept(self, messages: Sequence[Message]) -> list[Message]:
        """``messages`` of the partitions this turn still holds."""
        if not self._gone:  # no rebalance during the turn: nearly always
            return list(messages)
        return [m for m in messages if _where(m) not in self._gone]

    def _flush(self) -> None:
        if self._producer.flush(30):
            raise ConsumersError("branch reports not acknowledged in 30 s; tasks will repeat")

    def _revoked(self, partitions: Sequence[TopicPartition]) -> None:
        """A rebalance takes ``partitions`` away. Inside a turn that happens only while a
        handler runs (the helper polls then): it is waited for and reported, and what the
        turn has done on them is committed before they go."""
        gone = self._release(partitions)
        self._keeper.wait_for_handler()
        done = self._done + self._report_outcome()  # the task in flight, once reported
        settled = [m for m in self._kept(self._turn[:done]) if _where(m) in gone]
        self._gone |= gone
        if settled:
            self._flush()
            self._commit(settled)

    def _lost(self, partitions: Sequence[TopicPartition]) -> None:
        """The group dropped this worker: ``partitions`` are another's now, and a commit for
        them would be refused; what the turn handled on them will be handled again there."""
        self._gone |= self._release(partitions)
        log.warning(
            "the group dropped this worker (assignment lost): tasks of %d partitions will "
            "be handled again by their next owner",
            len(partitions),
        )

    def _release(self, partitions: Sequence[TopicPartition]) -> set[tuple[str | None, int]]:
        """Resume ``partitions`` as they go (librdkafka keeps a partition's pause across
        assignments: one given back later would deliver nothing); their keys."""
        self._consumer.resume(list(partitions))
        return {(p.topic, p.partition or 0) for p in partitions}

    def _take(self, msg: Message) -> bool:
        """Handle ``msg`` if it is a task of a served slot; whether it was."""
        if msg.error() is not None or msg.value() is None:
            return False
        try:
            record = decode(msg.value() or b"")
        except SchemaError as e:
            log.warning(
                "undecodable task at %s[%d]@%d: %s", msg.topic(), msg.partition(), msg.offset(), e
            )
            return False
        served = self.slots is None or getattr(record, "slot", None) in self.slots
        if isinstance(record, BranchLaunched | BranchRelaunched) and served:
            self._handle(record)
            return True
        return False

    def _commit(self, done: Sequence[Message]) -> None:
        """Commit the offsets just past ``done`` (never past a task not yet handled)."""
        offsets = {where: offset + 1 for where, offset in _positions(done)}  # the last wins
        if not offsets:
            return
        try:
            self._consumer.commit(
                offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()],
                asynchronous=False,
            )
        except KafkaException as e:
            log.warning("offset commit failed (tasks may repeat): %s", e.args[0].str())

    def _seek_back(self, rest: Sequence[Message]) -> None:
        """Seek each partition back to its first task of ``rest`` (taken, not reached)."""
        first: dict[tuple[str, int], int] = {}
        for where, offset in _positions(rest):
            first.setdefault(where, offset)
        for (topic, partition), offset in first.items():
            try:
                self._consumer.seek(TopicPartition(topic, partition, offset))
            except KafkaException as e:  # the partition went elsewhere: its owner takes it
                log.warning("cannot seek %s[%d] back to %d: %s", topic, partition, offset, e)

    def _handle(self, launched: BranchLaunched | BranchRelaunched) -> None:
        task, first = take_task(
            launched,
            worker=self.name,
            now_ms=self.clock(),
            clock_uncertainty_ms=self.clock_uncertainty_ms,
            deadline_slots=self.deadline_slots,
        )
        self._report(first)
        if isinstance(first, ReportBranchStarted):
            self._keeper.lend(task)
            try:
                self._outcome = finish_task(task, self.handler, worker=self.name, clock=self.clock)
            finally:
                self._keeper.take_back()
            self._report_outcome()

    def _report_outcome(self) -> int:
        """Report the outcome of the handler that returned last, once; 1 if it did now."""
        outcome, self._outcome = self._outcome, None
        if outcome is None:
            return 0
        self._report(outcome)
        return 1

    def _report(self, event: Report) -> None:
        while True:
            try:
                self._producer.produce(
                    self._results, key=event.admission_key.encode(), value=encode(event)
                )
                self.reports[type(event).__name__.removeprefix("Report")] += 1
                return
            except BufferError:
                self._producer.poll(0.05)


REPORT_KINDS = ("BranchStarted", "BranchCompleted", "BranchFailed", "BranchSkipped")
"""The kinds of :data:`~consumers.branch_tasks.Report`, as :attr:`BranchWorker.reports`
counts them."""


def _where(msg: Message) -> tuple[str | None, int]:
    return msg.topic(), msg.partition() or 0


def _positions(messages: Sequence[Message]) -> Iterator[tuple[tuple[str, int], int]]:
    """((topic, partition), offset) of each of ``messages`` that has a position (an error
    event may not)."""
    for msg in messages:
        topic, offset = msg.topic(), msg.offset()
        if topic is not None and offset is not None and offset >= 0:
            yield (topic, msg.partition() or 0), offset
