"""Rows of branch records: launches on ``tasks``, accepted results on ``runs``, workers' claims.

A slot's rank is *terminal, attempt, stage, offset*, so a finished slot stays finished even
when its result arrives after a relaunch.
"""

from __future__ import annotations

from typing import Any

from projections.model import RowOp
from projections.rows import Source, fields_of, handles
from schemas.commands import (
    ReportBranchCompleted,
    ReportBranchFailed,
    ReportBranchSkipped,
    ReportBranchStarted,
)
from schemas.events import (
    BranchCompleted,
    BranchFailed,
    BranchLaunched,
    BranchRelaunched,
    BranchSkipped,
    BranchStarted,
)
from schemas.topics import RUNS

# The topic whose branch results count: the processor writes each accepted claim there once
# per (run, slot). Records of the same classes on branch-results are workers' claims written
# before 0.2.0; like today's ReportBranch* claims they only go to the event log.
ACCEPTED_REPORTS_TOPIC = RUNS.name


# Slot lifecycle order inside one attempt; terminal reports outrank everything (a finished
# slot never runs again), so the rank is [terminal, attempt, stage, offset].
_STAGE_LAUNCH, _STAGE_START, _STAGE_END = 0, 1, 2


def _slot(
    source: Source,
    r: Any,
    *,
    status: str,
    stage: int,
    at_ms: int,
    worker: str | None,
    detail: str | None,
) -> RowOp:
    terminal = 1 if stage == _STAGE_END else 0
    return (
        "branch_slots",
        {
            "run_id": r.run_id,
            "slot": r.slot,
            "admission_key": r.admission_key,
            "status": status,
            "attempt": r.attempt,
            "worker": worker,
            "detail": detail,
            "at_ms": at_ms,
            "rank": (terminal, r.attempt, stage, source.offset),
        },
    )


@handles(BranchLaunched, BranchRelaunched)
def _launch(source: Source, r: BranchLaunched | BranchRelaunched) -> list[RowOp]:
    if isinstance(r, BranchLaunched):
        kind, reason, at_ms = "launched", None, r.launched_at_ms
    else:
        kind, reason, at_ms = "relaunched", r.reason, r.relaunched_at_ms
    row = fields_of(
        r,
        "run_id",
        "slot",
        "attempt",
        "admission_key",
        "workflow_revision",
        "expires_at_ms",
        "timeout_at_ms",
    )
    row.update(kind=kind, reason=reason, at_ms=at_ms)
    return [
        ("branch_launches", row),
        _slot(source, r, status=kind, stage=_STAGE_LAUNCH, at_ms=at_ms, worker=None, detail=reason),
    ]


_REPORTS: dict[type, tuple[str, str | None, str]] = {
    BranchStarted: ("started", None, "started_at_ms"),
    BranchCompleted: ("completed", "result_json", "completed_at_ms"),
    BranchFailed: ("failed", "error", "failed_at_ms"),
    BranchSkipped: ("skipped", "reason", "skipped_at_ms"),
}


@handles(BranchStarted, BranchCompleted, BranchFailed, BranchSkipped)
def _report(source: Source, r: Any) -> list[RowOp]:
    if source.topic != ACCEPTED_REPORTS_TOPIC:
        return []
    kind, detail_field, at_field = _REPORTS[type(r)]
    detail = getattr(r, detail_field) if detail_field else None
    at_ms = getattr(r, at_field)
    stage = _STAGE_START if kind == "started" else _STAGE_END
    report = {
        "run_id": r.run_id,
        "slot": r.slot,
        "kind": kind,
        "attempt": r.attempt,
        "admission_key": r.admission_key,
        "worker": r.worker,
        "detail": detail,
        "at_ms": at_ms,
    }
    return [
        ("branch_reports", report),
        _slot(source, r, status=kind, stage=stage, at_ms=at_ms, worker=r.worker, detail=detail),
    ]


@handles(ReportBranchStarted, ReportBranchCompleted, ReportBranchFailed, ReportBranchSkipped)
def _worker_claim(source: Source, r: object) -> list[RowOp]:
    # A worker's claim reaches the event log (so a run's timeline shows what each worker said);
    # the slot tables and counts come from the facts the processor accepted.
    return []
