"""The branch-task contract every worker front end keeps: what a handler sees, what it may
return, and the reports a task gets.

:func:`take_task` and :func:`finish_task` are the two steps; ``BranchWorker``
(``branch_worker.py``) and the Faust bridge (``faust_bridge/slot.py``) both take and finish
tasks with them, so they keep one contract:

* The deadline is checked when the task is taken: a task that is no longer eligible
  (``now + clock_uncertainty >= expires_at``; equality fails) is reported skipped with reason
  ``expired_at_dequeue`` and the handler is never called. By default that check applies to
  every slot except those a run with actions keeps for the record only (``action_role``
  ``record``): the proposing and approving slots are always checked; ``deadline_slots``
  lists the slots explicitly instead. The allowance ``clock_uncertainty`` is the run's
  (carried by the task), never less than the worker's own ``clock_uncertainty_ms``.
  Relaunches carry the original deadline; nothing renews it.
* A handler may return a :class:`Proposal` (or a dict with a ``"proposal"`` object): from
  the proposing slot it becomes the run's candidate action at the gate. Instrument, venue
  and account are the run's, never the proposal's. A result that arrives after the
  deadline is kept for the record; the gate expires its candidate at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

import orjson

from consumers.errors import ConsumersError
from schemas.commands import (
    ReportBranchCompleted,
    ReportBranchFailed,
    ReportBranchSkipped,
    ReportBranchStarted,
)
from schemas.events import BranchLaunched, BranchRelaunched
from streams.core.limits import MAX_RESULT_BYTES

log = logging.getLogger("sluicegate.worker")

EXPIRED_AT_DEQUEUE = "expired_at_dequeue"
RECORD_ONLY = "record"
"""``action_role`` of a slot whose result a run with actions keeps for the record only."""


@dataclass(frozen=True)
class Task:
    """One branch task as the handler sees it.

    ``expires_at_ms`` is the run's absolute deadline (from its source time, never renewed);
    ``clock_uncertainty_ms`` the run's allowance (``None`` in tasks written before 0.2.0);
    ``action_role`` is ``propose``, ``approve``, ``record`` or ``None`` (no actions).
    """

    run_id: str
    admission_key: str
    slot: str
    attempt: int
    workflow_revision: int
    expires_at_ms: int
    payload: dict[str, object]
    source_time_ms: int | None = None
    clock_uncertainty_ms: int | None = None
    action_role: str | None = None

    def remaining(self, now_ms: int) -> int:
        """Milliseconds the run may still act: ``expires_at - clock_uncertainty - now``.

        Eligible while this is positive (``now + clock_uncertainty < expires_at``); zero or
        negative means the deadline passed (equality fails).
        """
        return self.expires_at_ms - (self.clock_uncertainty_ms or 0) - now_ms

    def remaining_ms(self, now_ms: int) -> int:
        """Time left before the signal's absolute deadline (negative once it passed)."""
        return self.expires_at_ms - now_ms


@dataclass(frozen=True)
class Proposal:
    """What a proposing slot's handler may return: the run's proposed action.

    ``kind`` is ``entry`` or ``exit``; ``side`` ``buy`` or ``sell``; exactly one of
    ``quantity`` and ``notional`` (decimal strings, quote currency for ``notional``; never
    floats). ``protection`` (e.g. ``{"kind": "stop_loss", "stop_price": "96000"}``) is sized
    later from the venue-reported exposure; ``reassessment_of`` names the candidate this one
    deliberately reassesses. ``result`` is kept beside the proposal in the slot's result.
    """

    kind: str
    side: str
    quantity: str | None = None
    notional: str | None = None
    limit_price: str | None = None
    max_slippage_bps: str | None = None
    params: dict[str, object] = field(default_factory=dict)
    protection: dict[str, object] | None = None
    notification: dict[str, object] | None = None
    reassessment_of: str | None = None
    result: dict[str, object] = field(default_factory=dict)

    def as_result(self) -> dict[str, object]:
        """The slot result that carries this proposal (``None`` fields left out)."""
        proposal: dict[str, object] = {"kind": self.kind, "side": self.side, "params": self.params}
        for name in (
            "quantity",
            "notional",
            "limit_price",
            "max_slippage_bps",
            "protection",
            "notification",
            "reassessment_of",
        ):
            value = getattr(self, name)
            if value is not None:
                proposal[name] = value
        return {**self.result, "proposal": proposal}


@dataclass(frozen=True)
class Skip:
    """Return this from a handler to report the branch skipped, with a reason."""

    reason: str


class BranchError(ConsumersError):
    """Raise from a handler to report the branch failed with this message."""


Handler = Callable[[Task], "dict[str, object] | Proposal | Skip"]
Report = ReportBranchStarted | ReportBranchCompleted | ReportBranchFailed | ReportBranchSkipped


def take_task(
    launched: BranchLaunched | BranchRelaunched,
    *,
    worker: str,
    now_ms: int,
    clock_uncertainty_ms: int = 0,
    deadline_slots: Collection[str] | None = None,
) -> tuple[Task, ReportBranchStarted | ReportBranchSkipped]:
    """Take a task at ``now_ms``: the handler's view of it and the first report to send.

    The allowance is the run's (``launched.clock_uncertainty_ms``), never less than
    ``clock_uncertainty_ms``. A task whose deadline is checked (:func:`checks_deadline`) and
    has no time left (``now + allowance >= expires_at``) gets
    ``ReportBranchSkipped(expired_at_dequeue)``: that is its only report, and the handler is
    never called. Otherwise ``ReportBranchStarted``, to be sent before the handler runs (the
    processor's branch timeout and the candidate's dequeue time count from it), and then
    :func:`finish_task`.
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
        source_time_ms=launched.source_time_ms,
        clock_uncertainty_ms=max(launched.clock_uncertainty_ms or 0, clock_uncertainty_ms),
        action_role=launched.action_role,
    )
    who = (task.run_id, task.admission_key, task.slot, task.attempt, worker)
    if checks_deadline(task, deadline_slots) and task.remaining(now_ms) <= 0:
        return task, ReportBranchSkipped(*who, EXPIRED_AT_DEQUEUE, now_ms)
    return task, ReportBranchStarted(*who, now_ms)


def finish_task(
    task: Task, handler: Handler, *, worker: str, clock: Callable[[], int]
) -> ReportBranchCompleted | ReportBranchFailed | ReportBranchSkipped:
    """Run ``handler`` on a started task: exactly one of completed (a dict, or a
    :class:`Proposal` as its result), failed (the handler raised, or its result is not JSON
    or is over :data:`~streams.core.limits.MAX_RESULT_BYTES` of it: no report could carry it)
    or skipped (it returned :class:`Skip`). Neither an ``Exception`` from the handler nor a
    result no report can carry escapes; a ``BaseException`` (``KeyboardInterrupt``) does.
    """
    who = (task.run_id, task.admission_key, task.slot, task.attempt, worker)
    try:
        outcome = handler(task)
    except BranchError as e:
        return ReportBranchFailed(*who, str(e), clock())
    except Exception as e:  # a handler bug fails the branch, not the worker
        log.exception("handler failed for %s/%s", task.run_id, task.slot)
        return ReportBranchFailed(*who, f"{type(e).__name__}: {e}", clock())
    if isinstance(outcome, Skip):
        return ReportBranchSkipped(*who, outcome.reason, clock())
    if isinstance(outcome, Proposal):
        outcome = outcome.as_result()
    try:
        result = orjson.dumps(outcome, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError as e:  # a Decimal, a set, a key not a str: nothing to report
        log.warning("%s/%s: a result that is not JSON (%s), failed", task.run_id, task.slot, e)
        error = f"the handler's result is not JSON ({e}); return decimals as strings"
        return ReportBranchFailed(*who, error, clock())
    if len(result) > MAX_RESULT_BYTES:
        log.warning("%s/%s: a result of %d bytes, failed", task.run_id, task.slot, len(result))
        error = (
            f"the handler's result is {len(result):,} bytes of JSON, more than the "
            f"{MAX_RESULT_BYTES:,} a branch result may have: return less, or where to find it"
        )
        return ReportBranchFailed(*who, error, clock())
    return ReportBranchCompleted(*who, result.decode(), clock())


def checks_deadline(task: Task, deadline_slots: Collection[str] | None) -> bool:
    """Whether ``task``'s deadline is checked when it is taken.

    ``deadline_slots`` given: for exactly those slots. Otherwise for every slot but one kept
    for the record (its role ``record``), which may finish after the deadline; a task that
    names no role (no actions, or written before 0.2.0) is checked, as every slot was before.
    """
    if deadline_slots is not None:
        return task.slot in deadline_slots
    return task.action_role != RECORD_ONLY
