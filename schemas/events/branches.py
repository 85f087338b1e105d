"""Branch events: the slots a run fans out to, and each slot's accepted result.

``BranchLaunched`` / ``BranchRelaunched`` go to ``tasks`` (the workers' queue); the results
(``BranchStarted``, ``BranchCompleted``, ``BranchFailed``, ``BranchSkipped``) are facts: the
workers' claims (``schemas.commands.ReportBranch*`` on ``branch-results``) as the admission
app accepted them, written to ``runs`` once per (run, slot). All keyed by admission key.
Before 0.2.0 workers wrote these classes to ``branch-results`` themselves; admission still
reads such records as the claims they were.
"""

from __future__ import annotations

from dataclasses import dataclass

from schemas.direct_init import direct_init


@direct_init
@dataclass(frozen=True)
class BranchLaunched:
    """Branch work for one (run, slot) was queued; written with ``RunAdmitted`` atomically.

    ``expires_at_ms`` is a copy of the run's deadline; v2 adds the rest of the copy (source
    time, its definition, the window, the clock-uncertainty allowance) and ``action_role``:
    ``propose`` or ``approve`` for the slots of the run's action, ``record`` for its other
    slots, null for a run without actions. v1 records decode with nulls (a worker then uses
    its own allowance).
    """

    run_id: str
    admission_key: str
    slot: str
    attempt: int
    workflow_revision: int
    expires_at_ms: int
    timeout_at_ms: int
    payload_json: str
    launched_at_ms: int
    # v2: the rest of the deadline copy, with its policy
    source_time_ms: int | None = None
    validity_source_time: str | None = None
    validity_window_ms: int | None = None
    clock_uncertainty_ms: int | None = None
    action_role: str | None = None


@direct_init
@dataclass(frozen=True)
class BranchRelaunched:
    """A slot that did not finish within the branch timeout was queued again, same run.

    Carries the run's original deadline copy (never renewed) and, from v2, its policy, as
    ``BranchLaunched`` does.
    """

    run_id: str
    admission_key: str
    slot: str
    attempt: int
    workflow_revision: int
    expires_at_ms: int
    timeout_at_ms: int
    payload_json: str
    reason: str
    relaunched_at_ms: int
    # v2: the rest of the deadline copy, with its policy
    source_time_ms: int | None = None
    validity_source_time: str | None = None
    validity_window_ms: int | None = None
    clock_uncertainty_ms: int | None = None
    action_role: str | None = None


@direct_init
@dataclass(frozen=True)
class BranchStarted:
    """Admission accepted a worker's ``ReportBranchStarted`` for (run, slot, attempt)."""

    run_id: str
    admission_key: str
    slot: str
    attempt: int
    worker: str
    started_at_ms: int


@direct_init
@dataclass(frozen=True)
class BranchCompleted:
    """Admission accepted a worker's ``ReportBranchCompleted``: the slot has its result, once
    per (run, slot)."""

    run_id: str
    admission_key: str
    slot: str
    attempt: int
    worker: str
    result_json: str
    completed_at_ms: int


@direct_init
@dataclass(frozen=True)
class BranchFailed:
    """Admission accepted a worker's ``ReportBranchFailed`` (or failed a slot that ran out of
    attempts, ``worker`` = ``sluicegate-processor``), once per (run, slot)."""

    run_id: str
    admission_key: str
    slot: str
    attempt: int
    worker: str
    error: str
    failed_at_ms: int


@direct_init
@dataclass(frozen=True)
class BranchSkipped:
    """Admission accepted a worker's ``ReportBranchSkipped`` (e.g. expired at dequeue), once
    per (run, slot)."""

    run_id: str
    admission_key: str
    slot: str
    attempt: int
    worker: str
    reason: str
    skipped_at_ms: int
