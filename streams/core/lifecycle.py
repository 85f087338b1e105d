"""State machines: the one mechanism (:class:`Machine`), and the run and branch-slot machines.

A :class:`Machine` is a name, an explicit transition table and its terminal states;
:meth:`Machine.transition` is the only way a core moves a status, so an impossible history (a
finished slot relaunched, a completed run moved back to running, a dispatched candidate
expired) raises :class:`~streams.core.errors.IllegalTransition` naming the machine instead of
being silently absorbed. Every core's machine is one instance: :data:`RUN` and :data:`BRANCH`
here, the gate's candidate machine (``streams.core.gate.lifecycle.CANDIDATE``) and the
journal's action machine (``streams.core.journal.lifecycle.ACTION``).

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
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Generic, TypeVar

from streams.core.errors import IllegalTransition

S = TypeVar("S", bound=StrEnum)


@dataclass(frozen=True)
class Machine(Generic[S]):
    """A named state machine over the statuses of one enum.

    ``transitions[s]`` is the set of statuses ``s`` may move to (every status has an entry);
    ``terminal`` are the statuses that never move (their entries are empty); ``initial`` are
    the statuses a new entity may begin in (``transition(None, target)``), empty when entities
    begin otherwise.
    """

    name: str
    transitions: Mapping[S, frozenset[S]]
    terminal: frozenset[S]
    initial: frozenset[S] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        moving = sorted(s.value for s in self.terminal if self.transitions[s])
        if moving:
            raise ValueError(f"{self.name}: terminal statuses {moving} have moves")

    def transition(self, current: S | None, target: S) -> S:
        """Return ``target`` if ``current -> target`` is allowed, else raise IllegalTransition.

        ``current`` is ``None`` for an entity that has no status yet.
        """
        allowed = self.initial if current is None else self.transitions[current]
        if target not in allowed:
            raise IllegalTransition(
                self.name, "new" if current is None else current.value, target.value
            )
        return target

    def is_terminal(self, status: S) -> bool:
        """Whether ``status`` has its outcome and can never move again."""
        return status in self.terminal


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

RUN: Machine[RunStatus] = Machine("run", RUN_TRANSITIONS, _RUN_OUTCOMES)
"""A run: ``pending -> running -> completed | skipped | failed`` (it begins pending)."""
BRANCH: Machine[BranchStatus] = Machine("branch", BRANCH_TRANSITIONS, _BRANCH_OUTCOMES)
"""A branch slot: ``launched -> started -> completed | failed | skipped`` (begins launched)."""


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
    if RUN.is_terminal(previous):
        return previous
    listed = list(statuses)
    if listed and all(s is not None and BRANCH.is_terminal(s) for s in listed):
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
