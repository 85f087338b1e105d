"""Branch events: the slots a run fans out to, and each slot's accepted result.

``BranchLaunched`` / ``BranchRelaunched`` go to ``tasks`` (the workers' queue); the results
(``BranchStarted``, ``BranchCompleted``, ``BranchFailed``, ``BranchSkipped``) are what the
workers report on ``branch-results``, and what the admission app accepted and wrote to
``runs``, once per (run, slot). All keyed by admission key.
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
    """A branch worker took the task for (run, slot, attempt). Reported by the worker."""

    run_id: str
    admission_key: str
    slot: str
    attempt: int
    worker: str
    started_at_ms: int


@dataclass(frozen=True)
class BranchCompleted:
    """A branch finished with a result. Reported by the worker; idempotent per (run, slot)."""

    run_id: str
    admission_key: str
    slot: str
    attempt: int
    worker: str
    result_json: str
    completed_at_ms: int


@dataclass(frozen=True)
class BranchFailed:
    """A branch gave up with an error. Reported by the worker; idempotent per (run, slot)."""

    run_id: str
    admission_key: str
    slot: str
    attempt: int
    worker: str
    error: str
    failed_at_ms: int


@dataclass(frozen=True)
class BranchSkipped:
    """A branch decided not to act (e.g. expired at dequeue). Idempotent per (run, slot)."""

    run_id: str
    admission_key: str
    slot: str
    attempt: int
    worker: str
    reason: str
    skipped_at_ms: int
