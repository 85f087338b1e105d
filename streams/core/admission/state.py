"""What admission keeps per admission key: the occurrence, its runs and their branch slots."""

from __future__ import annotations

from dataclasses import dataclass

from schemas.direct_init import constructor, direct_init
from streams.core.lifecycle import BRANCH, BranchStatus, RunStatus
from streams.core.limits import DEFAULT_CLOCK_UNCERTAINTY_MS
from streams.core.workflow import DEFAULT_BRANCH_ATTEMPTS

EVICTION_MARGIN_MS = 3_600_000
"""Extra time an admission record is kept beyond ``source time + retention`` (1 hour), so a
copy racing the horizon is still answered by its run rather than rejected."""


@direct_init
@dataclass(frozen=True)
class SlotState:
    """One launched branch slot of a run: its status, current attempt and timeout."""

    slot: str
    status: BranchStatus
    attempt: int
    timeout_at_ms: int


@direct_init
@dataclass(frozen=True)
class RunState:
    """One run of the occurrence (rerun 0 is the admitted run; reruns count up).

    ``slot_names`` are the slots the run was admitted with; ``slots`` holds the launched ones
    in launch order. ``branch_timeout_ms`` is taken from the run's first ``BranchLaunched``
    (``timeout_at - launched_at``). ``retention_ms`` is the horizon the run was admitted
    under, when the event carries it (``None`` otherwise: the record is then never evicted).
    ``branch_attempts`` and ``clock_uncertainty_ms`` are frozen from ``RunAdmitted``, as is
    the action policy (``action_*``, ``generation_kind``). ``proposal_dequeued_at_ms`` is when
    a worker last took the proposing slot (its accepted ``BranchStarted``) and
    ``proposed_kind`` the kind of the candidate the run proposed (``None``: none yet).
    """

    run_id: str
    rerun_number: int
    status: RunStatus
    workflow_revision: int
    delivery_id: str
    subscription: str
    environment: str
    source: str
    event_id: str | None
    content_digest: str
    source_time_ms: int
    expires_at_ms: int
    validity_source_time: str
    validity_window_ms: int
    scope_key: str | None
    sequence: str | None
    payload_json: str
    slot_names: tuple[str, ...]
    slots: tuple[SlotState, ...]
    branch_timeout_ms: int
    retention_ms: int | None
    rerun_of: str | None
    rerun_reason: str | None
    admitted_at_ms: int
    branch_attempts: int = DEFAULT_BRANCH_ATTEMPTS
    clock_uncertainty_ms: int = DEFAULT_CLOCK_UNCERTAINTY_MS
    action_propose_slot: str | None = None
    action_approve_slots: tuple[str, ...] = ()
    action_exit_window_ms: int | None = None
    generation_kind: str | None = None
    proposal_dequeued_at_ms: int | None = None
    proposed_kind: str | None = None

    def action_role(self, slot: str) -> str | None:
        """``propose``, ``approve``, ``record`` (a run with actions; the slot's result is for
        the record only) or ``None`` (a run without actions)."""
        if self.action_propose_slot is None:
            return None
        if slot == self.action_propose_slot:
            return "propose"
        return "approve" if slot in self.action_approve_slots else "record"

    def slot(self, name: str) -> SlotState | None:
        """The launched slot ``name``, or ``None`` if it was never launched."""
        for slot in self.slots:
            if slot.slot == name:
                return slot
        return None

    def slot_statuses(self) -> tuple[BranchStatus | None, ...]:
        """Status of every admitted slot in ``slot_names`` order (``None`` = not launched)."""
        by_name = {s.slot: s.status for s in self.slots}
        return tuple(by_name.get(name) for name in self.slot_names)

    def unfinished(self) -> bool:
        """Whether any admitted slot is not launched yet or has no outcome yet."""
        return any(s is None or not BRANCH.is_terminal(s) for s in self.slot_statuses())


@direct_init
@dataclass(frozen=True)
class OccurrenceState:
    """Everything the processor keeps for one admission key.

    ``runs[0]`` is the original run; deliveries are always answered with it. ``evict_at_ms``
    is when the record may leave the state (see the module docstring), ``None`` if unknown.
    """

    admission_key: str
    runs: tuple[RunState, ...]
    evict_at_ms: int | None

    @property
    def original(self) -> RunState:
        """The run the occurrence was admitted with (rerun 0)."""
        return self.runs[0]

    def run(self, run_id: str) -> RunState | None:
        """The run with ``run_id``, or ``None``."""
        for run in self.runs:
            if run.run_id == run_id:
                return run
        return None


build_run_state = constructor(RunState)
"""``RunState(...)`` without ``type.__call__`` (every admitted run and decoded state builds
one; :func:`schemas.direct_init.constructor`)."""
