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
  (commit order: handle -> produce reports -> flush -> commit offsets, once per turn). A turn
  takes up to 200 tasks and ends early once its handlers have run 5 s (the tasks it did not
  reach are sought back to and taken by the next turn), so a crash repeats at most that
  turn's tasks, one task if each handler takes 5 s or more. The processor counts each (run,
  slot) result once, so a repeat is harmless to the run, but a handler with external effects
  must itself be idempotent per (run_id, slot), for example by keying its writes on them.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence

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
from consumers.errors import ConsumersError
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
        self.came_round_at = monotonic()
        """Monotonic time the worker last made progress: its loop came round or a handler
        returned (construction, before it runs)."""
        self._results = settings.topic(BRANCH_RESULTS)
        self._consumer = read_committed_consumer(
            settings,
            group_id=f"{settings.topic_prefix}{group}",
            tuning={"auto.offset.reset": "earliest"},
        )
        self._producer = idempotent_producer(settings, tuning={"linger.ms": 5})
        self._consumer.subscribe([settings.topic(TASKS)])

    def run(self) -> None:
        try:
            while not self.stop_event.is_set():
                self.came_round_at = self.monotonic()
                self.step()
        finally:
            self._consumer.close()
            self._producer.flush(10)

    def stop(self) -> None:
        self.stop_event.set()

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
        crash repeats at most one turn's tasks however slow the handlers, and the consumer
        is polled often enough to keep its assignment (``max.poll.interval.ms``, 300 s; a
        single handler must stay below it).
        """
        messages = take(self._consumer, BATCH, timeout_s)
        started = self.monotonic()
        handled = 0
        reached = 0
        for msg in messages:
            # came_round_at is when the last handled task ended.
            if handled and self.came_round_at - started >= TURN_BUDGET_S:
                break
            reached += 1
            if self._take(msg):
                handled += 1
                self.came_round_at = self.monotonic()
        if reached < len(messages):
            self._seek_back(messages[reached:])
        if reached:
            if self._producer.flush(30):
                raise ConsumersError("branch reports not acknowledged in 30 s; tasks will repeat")
            self._commit(messages[:reached])
        self.handled += handled
        return handled

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
            self._report(finish_task(task, self.handler, worker=self.name, clock=self.clock))

    def _report(self, event: Report) -> None:
        while True:
            try:
                self._producer.produce(
                    self._results, key=event.admission_key.encode(), value=encode(event)
                )
                return
            except BufferError:
                self._producer.poll(0.05)


def _positions(messages: Sequence[Message]) -> Iterator[tuple[tuple[str, int], int]]:
    """((topic, partition), offset) of each of ``messages`` that has a position (an error
    event may not)."""
    for msg in messages:
        topic, offset = msg.topic(), msg.offset()
        if topic is not None and offset is not None and offset >= 0:
            yield (topic, msg.partition() or 0), offset


DEMO_DELAY_FIELD = "demo_approval_delay_ms"
"""Payload field that makes the demonstration handler's approvals take that long (at most
4 s): how ``make run`` keeps a candidate pending while a newer one arrives."""


def demo_handler(task: Task) -> dict[str, object] | Proposal:
    """The handler of ``sluicegate worker``: records what it saw, like a journal branch, and
    from the proposing slot proposes a small entry on the signal's side, with a take-profit
    protection and a notification. An approving slot
    takes ``demo_approval_delay_ms`` of the payload (at most 4 s) before it completes."""
    delay = task.payload.get(DEMO_DELAY_FIELD)
    if task.action_role == "approve" and isinstance(delay, int) and not isinstance(delay, bool):
        time.sleep(min(max(delay, 0), 4_000) / 1000)
    seen: dict[str, object] = {
        "slot": task.slot,
        "instrument": task.payload.get("instrument"),
        "side": task.payload.get("side"),
        "attempt": task.attempt,
    }
    if task.action_role == "propose":
        side = task.payload.get("side")
        return Proposal(
            kind="entry",
            side=side if side in ("buy", "sell") else "buy",
            # 0.01 less the venue's 0.1 % commission is still a multiple of BTCUSDT's lot
            # step (0.00001), so the protection sized from it passes the venue's filter.
            quantity="0.01",
            params={"rule": task.payload.get("rule")},
            # A resting take-profit (sized later from the exposure the venue reports) and a
            # report to the operators' channel, so the demo shows a run's three actions.
            protection={"kind": "take_profit", "limit_price": "99000.00", "stop_price": "99000.00"},
            notification={"channel": "ops", "text": "entry placed by the demo worker"},
            result=seen,
        )
    return seen
