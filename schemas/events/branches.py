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


@dataclass(frozen=True)
class BranchLaunched:
    """Branch work for one (run, slot) was queued; written with ``RunAdmitted`` atomically."""

    run_id: str
    admission_key: str
    slot: str
    attempt: int
    workflow_revision: int
    expires_at_ms: int
    timeout_at_ms: int
    payload_json: str
    launched_at_ms: int


@dataclass(frozen=True)
class BranchRelaunched:
    """A slot that did not finish within the branch timeout was queued again, same run."""

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


@dataclass(frozen=True)
class BranchStarted:
    """Admission accepted a worker's ``ReportBranchStarted`` for (run, slot, attempt)."""

    run_id: str
    admission_key: str
    slot: str
    attempt: int
    worker: str
    started_at_ms: int


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
