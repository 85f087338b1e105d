"""Lifecycle machines of a run and of each of its branch slots.

Both machines have an explicit transition table; :func:`transition` is the only way the core
moves a status, so an impossible history (a finished slot relaunched, a completed run moved
back to running) raises :class:`~streams.core.errors.IllegalTransition` instead of being
silently absorbed.

Run: ``pending -> running -> completed | skipped | failed``; a run whose slots all finish
without any ``BranchStarted`` goes straight from ``pending`` to its outcome. Finished runs
never move again; a rerun is a new run.

Branch slot: ``launched -> started -> completed | failed | skipped``; a worker may report the
outcome without reporting the start; an unfinished slot (``launched`` or ``started``) may be
relaunched (``-> launched``, next attempt) when its timeout passes. Finished slots never move:
that is what makes completions idempotent per (run, slot).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import TypeVar

from streams.core.errors import IllegalTransition


class RunStatus(StrEnum):
    """Status of one run (the values are the strings used on the wire)."""

    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    SKIPPED = "skipped"
    FAILED = "failed"


class BranchStatus(StrEnum):
    """Status of one branch slot of a run (the values are the strings used on the wire)."""

    LAUNCHED = "launched"
    STARTED = "started"
    COMPLETED = "completed"
    FAILED = "failed"
    SKIPPED = "skipped"


_RUN_OUTCOMES = frozenset({RunStatus.COMPLETED, RunStatus.SKIPPED, RunStatus.FAILED})
_BRANCH_OUTCOMES = frozenset({BranchStatus.COMPLETED, BranchStatus.FAILED, BranchStatus.SKIPPED})

RUN_TRANSITIONS: Mapping[RunStatus, frozenset[RunStatus]] = {
    RunStatus.PENDING: frozenset({RunStatus.RUNNING}) | _RUN_OUTCOMES,
    RunStatus.RUNNING: _RUN_OUTCOMES,
    RunStatus.COMPLETED: frozenset(),
    RunStatus.SKIPPED: frozenset(),
    RunStatus.FAILED: frozenset(),
}
"""Allowed run moves: ``RUN_TRANSITIONS[from]`` is the set of legal targets."""

BRANCH_TRANSITIONS: Mapping[BranchStatus, frozenset[BranchStatus]] = {
    # launched -> launched is a relaunch of a slot no worker reported starting.
    BranchStatus.LAUNCHED: frozenset({BranchStatus.LAUNCHED, BranchStatus.STARTED})
    | _BRANCH_OUTCOMES,
    BranchStatus.STARTED: frozenset({BranchStatus.LAUNCHED}) | _BRANCH_OUTCOMES,
    BranchStatus.COMPLETED: frozenset(),
    BranchStatus.FAILED: frozenset(),
    BranchStatus.SKIPPED: frozenset(),
}
"""Allowed slot moves: ``BRANCH_TRANSITIONS[from]`` is the set of legal targets."""

S = TypeVar("S", RunStatus, BranchStatus)


def transition(current: S, target: S) -> S:
    """Return ``target`` if ``current -> target`` is allowed, else raise IllegalTransition."""
    if isinstance(current, RunStatus):
        allowed: frozenset[RunStatus] | frozenset[BranchStatus] = RUN_TRANSITIONS[current]
        machine = "run"
    else:
        allowed = BRANCH_TRANSITIONS[current]
        machine = "branch"
    if target not in allowed:
        raise IllegalTransition(machine, current.value, target.value)
    return target


def is_finished(status: BranchStatus) -> bool:
    """Whether a slot has its outcome (completed, failed or skipped) and can never move."""
    return status in _BRANCH_OUTCOMES


def is_terminal(status: RunStatus) -> bool:
    """Whether a run has its outcome (completed, skipped or failed) and can never move."""
    return status in _RUN_OUTCOMES


def run_status_from_slots(
    statuses: Iterable[BranchStatus | None], previous: RunStatus = RunStatus.PENDING
) -> RunStatus:
    """The run status implied by its slots' statuses (``None`` = slot not launched yet).

    * ``pending`` while no slot has started or finished;
    * ``running`` once any slot started or finished but not all finished;
    * when all finished: ``failed`` if any failed, ``skipped`` if all skipped, else
      ``completed``.

    ``previous`` keeps the result monotonic: a terminal run stays as it is, and a running
    run does not fall back to pending when its only started slot is relaunched.
    """
    if is_terminal(previous):
        return previous
    listed = list(statuses)
    if listed and all(s is not None and is_finished(s) for s in listed):
        if BranchStatus.FAILED in listed:
            return RunStatus.FAILED
        if all(s is BranchStatus.SKIPPED for s in listed):
            return RunStatus.SKIPPED
        return RunStatus.COMPLETED
    progressed = any(s is not None and s is not BranchStatus.LAUNCHED for s in listed)
    if progressed or previous is RunStatus.RUNNING:
        return RunStatus.RUNNING
    return RunStatus.PENDING


def deduplication_reason(status: RunStatus) -> str:
    """``DeliveryDeduplicated.reason`` for a copy arriving while the run has ``status``."""
    return "in_flight" if status in (RunStatus.PENDING, RunStatus.RUNNING) else status.value
