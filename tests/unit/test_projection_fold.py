"""The projection of a history equals a plain fold of it, however it was consumed.

The projector sees each partition in order but the partitions (and so the topics) interleave
arbitrarily, in batches of any size, and after a crash it may see a batch again. The pure
row mapping (``projections.handlers.project``) plus the merge rules
(``projections.model.MemoryProjection``, the same rules the SQL store uses) must give the
same tables as folding the history in its causal order with naive "last write wins" logic.
"""

from __future__ import annotations

import random
import zlib
from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from projections.handlers import Source, project
from projections.model import TABLES_BY_NAME, RowOp
from schemas.commands import (
    AdmitDelivery,
    AuthorizeRerun,
    ReportBranchCompleted,
    ReportBranchFailed,
    ReportBranchSkipped,
    ReportBranchStarted,
)
from schemas.events import (
    ActionDispatched,
    AdmissionRecordEvicted,
    BranchCompleted,
    BranchFailed,
    BranchLaunched,
    BranchRelaunched,
    BranchSkipped,
    BranchStarted,
    CandidateAccepted,
    CandidateExpired,
    CandidateProposed,
    CandidateRejected,
    CandidateSuperseded,
    DeliveryDeduplicated,
    DeliveryRejected,
    DispatchRequested,
    DispatchWithdrawn,
    OccurrenceConflict,
    RerunRejected,
    RunAdmitted,
    RunStatusChanged,
    WorkflowRevised,
)
from tests.support.history import Emitted, build_history
from tests.support.memory_projection import MemoryProjection

Positioned = tuple[Source, Emitted]
CLAIMS = (ReportBranchStarted, ReportBranchCompleted, ReportBranchFailed, ReportBranchSkipped)


def place(history: list[Emitted], partitions: int) -> list[Positioned]:
    """Give each event the partition its key hashes to and the next offset there."""
    next_offset: Counter[tuple[str, int]] = Counter()
    placed = []
    for event in history:
        p = 0 if event.topic == "workflows" else zlib.crc32(event.key.encode()) % partitions
        offset = next_offset[(event.topic, p)]
        next_offset[(event.topic, p)] += 1
        placed.append((Source(event.topic, p, offset, event.key, 1000 + offset), event))
    return placed


def consume_like_a_projector(
    placed: list[Positioned], rng: random.Random
) -> list[list[Positioned]]:
    """Interleave the partitions at random, cut into batches, and repeat some batches."""
    queues: dict[tuple[str, int], list[Positioned]] = {}
    for item in placed:
        queues.setdefault((item[0].topic, item[0].partition), []).append(item)
    order: list[Positioned] = []
    while queues:
        tp = rng.choice(sorted(queues))
        take = rng.randint(1, 5)
        order.extend(queues[tp][:take])
        del queues[tp][:take]
        if not queues[tp]:
            del queues[tp]
    batches: list[list[Positioned]] = []
    i = 0
    while i < len(order):
        size = rng.randint(1, 40)
        batches.append(order[i : i + size])
        i += size
        if batches and rng.random() < 0.15:
            batches.append(rng.choice(batches))  # redelivered after a crash
    return batches


def _row(**values: Any) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}


def _projected(table: str, values: dict[str, Any]) -> dict[str, Any]:
    """The fields of a record its table has columns for (later event fields are not projected)."""
    columns = TABLES_BY_NAME[table].columns
    return _row(**{k: v for k, v in values.items() if k in columns})


def fold(placed: list[Positioned]) -> tuple[dict[str, dict[Any, dict[str, Any]]], Counter[Any]]:
    """The read model, written the obvious way, over the history in causal order."""
    t: dict[str, dict[Any, dict[str, Any]]] = {
        name: {}
        for name in (
            "workflows",
            "deliveries",
            "delivery_outcomes",
            "runs",
            "run_status",
            "branch_launches",
            "branch_reports",
            "branch_slots",
            "rerun_requests",
            "rerun_rejections",
            "evictions",
            "candidates",
            "candidate_outcomes",
            "scope_generations",
        )
    }
    counters: Counter[Any] = Counter()

    def outcome(delivery_id: str, **values: Any) -> None:
        row = {
            "delivery_id": delivery_id,
            "reason": None,
            "detail": None,
            "original_digest": None,
            "conflicting_digest": None,
            "differing_fields": None,
            "received_at_ms": None,
        }
        row.update(values)
        t["delivery_outcomes"][(delivery_id,)] = _row(**row)

    def slot(r: Any, status: str, at_ms: int, worker: str | None, detail: str | None) -> None:
        t["branch_slots"][(r.run_id, r.slot)] = _row(
            run_id=r.run_id,
            slot=r.slot,
            admission_key=r.admission_key,
            status=status,
            attempt=r.attempt,
            worker=worker,
            detail=detail,
            at_ms=at_ms,
        )

    def candidate(
        r: Any, outcome: str, final_at: int | None, current: str | None, **more: Any
    ) -> dict[str, Any]:
        return _row(
            candidate_id=more.get("candidate_id", getattr(r, "candidate_id", None)),
            run_id=r.run_id,
            admission_key=r.admission_key,
            scope_key=r.scope_key,
            kind=r.kind,
            generation=r.generation,
            generation_kind=r.generation_kind,
            expires_at_ms=r.expires_at_ms,
            source_time_ms=r.source_time_ms,
            enqueued_at_ms=r.enqueued_at_ms,
            dequeued_at_ms=r.dequeued_at_ms,
            proposed_at_ms=r.proposed_at_ms,
            final_at_ms=final_at,
            current_generation=current,
            outcome=outcome,
            reason=more.get("reason"),
        )

    def ended(
        r: Any, cid: str, outcome: str, *, reason: str | None, at: int, current: str | None
    ) -> None:
        t["candidates"][(cid,)] = candidate(
            r, outcome, at, current, candidate_id=cid, reason=reason
        )
        t["candidate_outcomes"][(cid,)] = _row(
            candidate_id=cid,
            run_id=r.run_id,
            scope_key=r.scope_key,
            kind=r.kind,
            outcome=outcome,
            reason=reason,
            generation=r.generation,
            current_generation=current,
            decided_at_ms=at,
        )
        counter = {
            "dispatched": ("actions_dispatched", ""),
            "superseded": ("superseded", reason),
            "expired": ("expired_before_send", reason),
            "rejected": ("candidates_rejected", reason),
        }[outcome]
        counters[counter] += 1

    for source, event in placed:
        r = event.record
        if isinstance(r, WorkflowRevised):
            t["workflows"][(r.subscription, r.environment, r.revision)] = _projected(
                "workflows", vars(r)
            )
        elif isinstance(r, AdmitDelivery):
            if (r.delivery_id,) not in t["deliveries"]:
                counters["deliveries", ""] += 1
            row = dict(vars(r), src_partition=source.partition, src_offset=source.offset)
            t["deliveries"][(r.delivery_id,)] = _row(**row)
        elif isinstance(r, AuthorizeRerun):
            t["rerun_requests"][(r.request_id,)] = _row(**vars(r))
        elif isinstance(r, RunAdmitted):
            t["runs"][(r.run_id,)] = _projected("runs", vars(r))
            counters["runs_admitted", ""] += 1
            t["run_status"][(r.run_id,)] = _row(
                run_id=r.run_id,
                status="pending",
                previous_status=None,
                changed_at_ms=r.admitted_at_ms,
            )
            if r.rerun_of is None:
                outcome(
                    r.delivery_id,
                    admission_key=r.admission_key,
                    run_id=r.run_id,
                    outcome="admitted",
                    decided_at_ms=r.admitted_at_ms,
                )
        elif isinstance(r, RunStatusChanged):
            t["run_status"][(r.run_id,)] = _row(
                run_id=r.run_id,
                status=r.status,
                previous_status=r.previous_status,
                changed_at_ms=r.changed_at_ms,
            )
        elif isinstance(r, DeliveryDeduplicated):
            counters["duplicates", r.reason] += 1
            outcome(
                r.delivery_id,
                admission_key=r.admission_key,
                run_id=r.run_id,
                outcome="deduplicated",
                reason=r.reason,
                received_at_ms=r.received_at_ms,
                decided_at_ms=r.decided_at_ms,
            )
        elif isinstance(r, OccurrenceConflict):
            counters["conflicts", ""] += 1
            outcome(
                r.delivery_id,
                admission_key=r.admission_key,
                run_id=r.run_id,
                outcome="conflict",
                reason="content_differs",
                original_digest=r.original_digest,
                conflicting_digest=r.conflicting_digest,
                differing_fields=list(r.differing_fields),
                received_at_ms=r.received_at_ms,
                decided_at_ms=r.decided_at_ms,
            )
        elif isinstance(r, DeliveryRejected):
            counters["rejected", r.reason] += 1
            outcome(
                r.delivery_id,
                admission_key=r.admission_key,
                run_id=None,
                outcome="rejected",
                reason=r.reason,
                detail=r.detail,
                received_at_ms=r.received_at_ms,
                decided_at_ms=r.decided_at_ms,
            )
        elif isinstance(r, BranchLaunched | BranchRelaunched):
            launched = isinstance(r, BranchLaunched)
            kind = "launched" if launched else "relaunched"
            counters["branch_launches" if launched else "branch_relaunches", ""] += 1
            reason = None if isinstance(r, BranchLaunched) else r.reason
            at = r.launched_at_ms if isinstance(r, BranchLaunched) else r.relaunched_at_ms
            t["branch_launches"][(r.run_id, r.slot, kind, r.attempt)] = _row(
                run_id=r.run_id,
                slot=r.slot,
                kind=kind,
                attempt=r.attempt,
                admission_key=r.admission_key,
                workflow_revision=r.workflow_revision,
                expires_at_ms=r.expires_at_ms,
                timeout_at_ms=r.timeout_at_ms,
                reason=reason,
                at_ms=at,
            )
            slot(r, kind, at, None, reason)
        elif isinstance(r, BranchStarted | BranchCompleted | BranchFailed | BranchSkipped):
            if event.topic != "runs":
                continue  # a worker's report; only the processor's accepted copy counts
            kind, detail, at = _report_fields(r)
            if kind == "skipped" and detail == "expired_at_dequeue":
                counters["expired_at_dequeue", ""] += 1
            t["branch_reports"][(r.run_id, r.slot, kind, r.attempt)] = _row(
                run_id=r.run_id,
                slot=r.slot,
                kind=kind,
                attempt=r.attempt,
                admission_key=r.admission_key,
                worker=r.worker,
                detail=detail,
                at_ms=at,
            )
            slot(r, kind, at, r.worker, detail)
        elif isinstance(
            r,
            ReportBranchStarted | ReportBranchCompleted | ReportBranchFailed | ReportBranchSkipped,
        ):
            continue  # a worker's claim; only the fact the processor accepted counts
        elif isinstance(r, RerunRejected):
            t["rerun_rejections"][(r.request_id,)] = _row(**vars(r))
        elif isinstance(r, AdmissionRecordEvicted):
            t["evictions"][(r.admission_key,)] = _row(**vars(r))
        elif isinstance(r, DispatchRequested | DispatchWithdrawn):
            continue  # the gate's decision on it is what the tables show
        elif isinstance(r, CandidateProposed | CandidateAccepted):
            accepted = isinstance(r, CandidateAccepted)
            if not accepted and (r.candidate_id,) in t["candidates"]:
                continue
            t["candidates"][(r.candidate_id,)] = candidate(
                r, "accepted" if accepted else "proposed", None, r.generation if accepted else None
            )
            if isinstance(r, CandidateAccepted):
                t["scope_generations"][(r.scope_key, r.kind)] = _row(
                    scope_key=r.scope_key,
                    kind=r.kind,
                    generation=r.generation,
                    generation_kind=r.generation_kind,
                    candidate_id=r.candidate_id,
                    accepted_at_ms=r.accepted_at_ms,
                )
        elif isinstance(r, CandidateSuperseded | CandidateExpired | CandidateRejected):
            name = {
                CandidateSuperseded: "superseded",
                CandidateExpired: "expired",
                CandidateRejected: "rejected",
            }[type(r)]
            ended(
                r,
                r.candidate_id,
                name,
                reason=r.reason,
                at=r.decided_at_ms,
                current=r.current_generation,
            )
        elif isinstance(r, ActionDispatched):
            ended(
                r,
                r.action_id,
                "dispatched",
                reason=None,
                at=r.dispatched_at_ms,
                current=r.generation,
            )
        else:  # pragma: no cover - a new record type needs a line here
            raise AssertionError(f"fold does not know {type(r).__name__}")
    return t, counters


def _report_fields(
    r: BranchStarted | BranchCompleted | BranchFailed | BranchSkipped,
) -> tuple[str, str | None, int]:
    if isinstance(r, BranchStarted):
        return "started", None, r.started_at_ms
    if isinstance(r, BranchCompleted):
        return "completed", r.result_json, r.completed_at_ms
    if isinstance(r, BranchFailed):
        return "failed", r.error, r.failed_at_ms
    return "skipped", r.reason, r.skipped_at_ms


def project_batches(batches: list[list[Positioned]]) -> MemoryProjection:
    memory = MemoryProjection()
    for batch in batches:
        ops: list[RowOp] = []
        for source, event in batch:
            ops.extend(project(source, event.record))
        memory.apply(ops)
    return memory


def without_rank(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in row.items() if k != "rank"} for row in rows]


def sorted_rows(table: dict[Any, dict[str, Any]]) -> list[dict[str, Any]]:
    return [table[k] for k in sorted(table, key=repr)]


def assert_equal_to_fold(memory: MemoryProjection, placed: list[Positioned]) -> None:
    expected, counters = fold(placed)
    for name, table in expected.items():
        got = without_rank(memory.rows(name))
        got.sort(key=lambda row: repr(tuple(row[k] for k in _keys(name))))
        want = sorted_rows(table)
        want = [dict(sorted(w.items())) for w in want]
        got = [dict(sorted(g.items())) for g in got]
        assert got == want, f"table {name} differs from the fold"
    assert +memory.counters == +counters
    log = memory.tables.get("event_log", {})
    assert len(log) == len(placed)
    assert {k[:3] for k in log} == {(s.topic, s.partition, s.offset) for s, _ in placed}


def _keys(name: str) -> tuple[str, ...]:
    from projections.model import TABLES_BY_NAME

    return TABLES_BY_NAME[name].key


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    occurrences=st.integers(1, 12),
    partitions=st.integers(1, 4),
    consume_seed=st.integers(0, 2**32 - 1),
    cut=st.floats(0.0, 1.0),
)
def test_projection_equals_fold(
    seed: int, occurrences: int, partitions: int, consume_seed: int, cut: float
) -> None:
    history = build_history(random.Random(seed), occurrences)
    # A prefix of the history leaves runs and slots mid-flight, as a live projection sees them.
    history = history[: round(len(history) * cut)]
    placed = place(history, partitions)
    batches = consume_like_a_projector(placed, random.Random(consume_seed))
    memory = project_batches(batches)
    assert_equal_to_fold(memory, placed)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    consume_seeds=st.lists(st.integers(0, 999), min_size=2, max_size=3),
)
def test_projection_does_not_depend_on_interleaving(seed: int, consume_seeds: list[int]) -> None:
    """A rebuild interleaves topics differently from the live run: same tables anyway."""
    placed = place(build_history(random.Random(seed), 8), 3)
    results = [
        project_batches(consume_like_a_projector(placed, random.Random(s))) for s in consume_seeds
    ]
    first = results[0]
    for other in results[1:]:
        assert other.tables == first.tables
        assert other.counters == first.counters


def test_applying_everything_again_changes_nothing() -> None:
    placed = place(build_history(random.Random(7), 20), 3)
    memory = project_batches([placed])
    before = ({k: dict(v) for k, v in memory.tables.items()}, Counter(memory.counters))
    memory.apply(op for source, event in placed for op in project(source, event.record))
    assert (memory.tables, memory.counters) == before
