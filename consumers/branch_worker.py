"""The branch-worker SDK: take branch tasks, run a handler, report the result.

A worker consumes ``tasks`` (``BranchLaunched`` / ``BranchRelaunched``) for the slots it
serves and reports ``ReportBranchStarted`` and then ``ReportBranchCompleted``,
``ReportBranchFailed`` or ``ReportBranchSkipped`` to ``branch-results``, keyed by admission
key, so the report lands on the partition that holds its run. These are claims: the processor
accepts each once per (run, slot) and writes the fact (``BranchCompleted``, ...) to ``runs``.

Guarantees and limits:

* At-least-once: offsets are committed only after the reports of the batch were acknowledged
  (commit order: handle -> produce reports -> flush -> commit offsets). A crash in between
  repeats the task; the processor counts each (run, slot) result once, so a repeat is
  harmless to the run, but a handler with external effects must itself be idempotent per
  (run_id, slot), for example by keying its writes on them.
* The deadline is checked when the task is taken: a task whose ``expires_at_ms`` has passed
  (``now + clock_uncertainty >= expires_at``; equality fails) is reported skipped with reason
  ``expired_at_dequeue`` and the handler is never called, for the slots listed in
  ``deadline_slots`` (default: all). Relaunches carry the original deadline; nothing renews it.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import orjson
from confluent_kafka import KafkaException

from consumers.errors import ConsumersError
from schemas.codec import decode, encode
from schemas.commands import (
    ReportBranchCompleted,
    ReportBranchFailed,
    ReportBranchSkipped,
    ReportBranchStarted,
)
from schemas.errors import SchemaError
from schemas.events import BranchLaunched, BranchRelaunched
from schemas.topics import BRANCH_RESULTS, TASKS
from streams.kafka.clients import idempotent_producer, read_committed_consumer
from streams.settings import Settings

log = logging.getLogger("sluicegate.worker")

EXPIRED_AT_DEQUEUE = "expired_at_dequeue"


@dataclass(frozen=True)
class Task:
    """One branch task as the handler sees it."""

    run_id: str
    admission_key: str
    slot: str
    attempt: int
    workflow_revision: int
    expires_at_ms: int
    payload: dict[str, object]

    def remaining_ms(self, now_ms: int) -> int:
        """Time left before the signal's absolute deadline (negative once it passed)."""
        return self.expires_at_ms - now_ms


@dataclass(frozen=True)
class Skip:
    """Return this from a handler to report the branch skipped, with a reason."""

    reason: str


class BranchError(ConsumersError):
    """Raise from a handler to report the branch failed with this message."""


Handler = Callable[[Task], "dict[str, object] | Skip"]
Report = ReportBranchStarted | ReportBranchCompleted | ReportBranchFailed | ReportBranchSkipped


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


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
        clock: Callable[[], int] = _now_ms,
        name: str | None = None,
    ) -> None:
        self.handler = handler
        self.slots = set(slots) if slots else None
        self.deadline_slots = set(deadline_slots) if deadline_slots is not None else None
        self.clock_uncertainty_ms = clock_uncertainty_ms
        self.clock = clock
        self.name = name or f"{socket.gethostname()}-{threading.get_ident()}"
        self.stop_event = threading.Event()
        self.handled = 0
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
                self.step()
        finally:
            self._consumer.close()
            self._producer.flush(10)

    def stop(self) -> None:
        self.stop_event.set()

    def step(self, timeout_s: float = 0.2) -> int:
        """Handle one batch of tasks; return how many were handled."""
        messages = self._consumer.consume(200, timeout=timeout_s)
        handled = 0
        for msg in messages:
            if msg.error() is not None or msg.value() is None:
                continue
            try:
                record = decode(msg.value() or b"")
            except SchemaError as e:
                log.warning(
                    "undecodable task at %s[%d]@%d: %s",
                    msg.topic(),
                    msg.partition(),
                    msg.offset(),
                    e,
                )
                continue
            served = self.slots is None or getattr(record, "slot", None) in self.slots
            if isinstance(record, BranchLaunched | BranchRelaunched) and served:
                self._handle(record)
                handled += 1
        if messages:
            if self._producer.flush(30):
                raise ConsumersError("branch reports not acknowledged in 30 s; tasks will repeat")
            try:
                self._consumer.commit(asynchronous=False)
            except KafkaException as e:
                log.warning("offset commit failed (tasks may repeat): %s", e.args[0].str())
        self.handled += handled
        return handled

    def _handle(self, launched: BranchLaunched | BranchRelaunched) -> None:
        checks_deadline = self.deadline_slots is None or launched.slot in self.deadline_slots
        for report in run_task(
            launched,
            self.handler,
            worker=self.name,
            clock=self.clock,
            clock_uncertainty_ms=self.clock_uncertainty_ms,
            checks_deadline=checks_deadline,
        ):
            self._report(report)

    def _report(
        self,
        event: ReportBranchStarted
        | ReportBranchCompleted
        | ReportBranchFailed
        | ReportBranchSkipped,
    ) -> None:
        while True:
            try:
                self._producer.produce(
                    self._results, key=event.admission_key.encode(), value=encode(event)
                )
                return
            except BufferError:
                self._producer.poll(0.05)


def run_task(
    launched: BranchLaunched | BranchRelaunched,
    handler: Handler,
    *,
    worker: str,
    clock: Callable[[], int],
    clock_uncertainty_ms: int,
    checks_deadline: bool = True,
) -> list[Report]:
    """The reports for one task, in the order they must be sent; no IO of its own.

    An expired task (``now + clock_uncertainty >= expires_at`` when ``checks_deadline``) gives
    one ``ReportBranchSkipped(expired_at_dequeue)`` and the handler is never called; otherwise
    ``ReportBranchStarted`` and then exactly one of completed, failed (the handler raised) or
    skipped (the handler returned :class:`Skip`). Every worker front end (this module's
    :class:`BranchWorker`, the Faust bridge) sends what this returns, so they keep one contract.
    """
    payload = orjson.loads(launched.payload_json)
    task = Task(
        run_id=launched.run_id,
        admission_key=launched.admission_key,
        slot=launched.slot,
        attempt=launched.attempt,
        workflow_revision=launched.workflow_revision,
        expires_at_ms=launched.expires_at_ms,
        payload=payload if isinstance(payload, dict) else {},
    )
    who = (task.run_id, task.admission_key, task.slot, task.attempt, worker)
    now = clock()
    if checks_deadline and now + clock_uncertainty_ms >= task.expires_at_ms:
        return [ReportBranchSkipped(*who, EXPIRED_AT_DEQUEUE, now)]
    started = ReportBranchStarted(*who, now)
    try:
        outcome = handler(task)
    except BranchError as e:
        return [started, ReportBranchFailed(*who, str(e), clock())]
    except Exception as e:  # a handler bug fails the branch, not the worker
        log.exception("handler failed for %s/%s", task.run_id, task.slot)
        return [started, ReportBranchFailed(*who, f"{type(e).__name__}: {e}", clock())]
    if isinstance(outcome, Skip):
        return [started, ReportBranchSkipped(*who, outcome.reason, clock())]
    result = orjson.dumps(outcome, option=orjson.OPT_SORT_KEYS).decode()
    return [started, ReportBranchCompleted(*who, result, clock())]


def demo_handler(task: Task) -> dict[str, object]:
    """The handler of ``sluicegate worker``: records what it saw, like a journal branch."""
    return {
        "slot": task.slot,
        "instrument": task.payload.get("instrument"),
        "side": task.payload.get("side"),
        "attempt": task.attempt,
    }
