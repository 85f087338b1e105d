"""The admission aggregate: one state per admission key, decided purely.

``decide(state, command, now) -> events`` and ``evolve(state, event) -> state`` are the whole
contract. The engine keeps one :class:`OccurrenceState` per admission key (deliveries, branch
reports and rerun requests are keyed by it), calls :func:`decide`, writes the events and the
evolved state in one Kafka transaction, and calls :func:`decide` with :class:`CheckTimers`
whenever :func:`next_due_ms` of a state has passed. Nothing here reads a clock: ``now`` (epoch
ms UTC) is passed in, and every event records the ``now`` it was decided at.

Guarantees
----------
* **One run per occurrence.** The first acceptable delivery of an admission key produces
  ``RunAdmitted`` (rerun 0, deterministic run id) and one ``BranchLaunched`` per slot, in the
  same output. Every later delivery of that key produces exactly one outcome event:
  ``DeliveryDeduplicated`` (answered with the *original* run, reason ``in_flight``,
  ``completed``, ``skipped`` or ``failed``) or ``OccurrenceConflict`` (same identity, other
  immutable content or source time; the original run is untouched).
* **Frozen context.** A run keeps the workflow revision, slots, payload, source time and
  deadline it was admitted with; a redeploy between retries never creates a new run.
* **Explicit horizon.** A first delivery whose source time is older than ``now`` minus the
  smallest retention in effect since its source time
  (:func:`streams.core.retention.smallest_retention`) is
  ``DeliveryRejected(beyond_horizon)``. The record is evicted no earlier than
  ``source time + retention + EVICTION_MARGIN_MS`` (the retention it was admitted under) and
  only once every branch slot of every run has finished, so a copy arriving after eviction
  is already beyond the horizon, whatever retention was applied in between.
* **No self-extended validity.** A first delivery whose source time is later than
  ``now + clock_uncertainty`` is ``DeliveryRejected(source_time_in_future)``: a sender
  cannot push its own deadline out.
* **Bounded state.** Payloads over :data:`~streams.core.limits.MAX_PAYLOAD_BYTES` are
  ``payload_too_large``, reruns beyond :data:`~streams.core.limits.MAX_RERUNS` are
  ``rerun_limit``, and together with the other limits of :mod:`streams.core.limits` no
  state can grow past :data:`~streams.core.limits.MAX_STATE_BYTES`.
* **Idempotent branch reports.** A report for a finished slot, an unknown run or slot, or an
  attempt that was never launched produces no events; a repeated message never counts twice.
  A finishing report from an older attempt still finishes the slot (the work was done).
* **Missing-slot recovery.** A slot with no result by its timeout is relaunched under the same
  run (next attempt) until the run's ``branch_attempts`` launches were made (the workflow's,
  frozen at admission), then failed by the processor. Finished slots are never relaunched.
* **Loud corruption.** :func:`evolve` raises :class:`~streams.core.errors.IllegalTransition` or
  :class:`~streams.core.errors.InconsistentHistory` for an event :func:`decide` could not
  have produced from that state.

Rejection reasons (``DeliveryRejected.reason``, :mod:`streams.core.reasons`):
``unknown_subscription``, ``payload_too_large``, ``missing_identity_fields``,
``invalid_field``, ``identity_mismatch`` (the delivery was keyed under another identity than
the processor derives: republish it), ``source_time_in_future`` and ``beyond_horizon``, judged
in that order. Rerun rejection reasons: ``unknown_run``, ``duplicate_request``,
``missing_reason``, ``invalid_request``, ``rerun_limit``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypeAlias

import orjson

from schemas.commands import AdmitDelivery, AuthorizeRerun
from schemas.events import (
    AdmissionRecordEvicted,
    BranchCompleted,
    BranchFailed,
    BranchLaunched,
    BranchRelaunched,
    BranchSkipped,
    BranchStarted,
    DeliveryDeduplicated,
    DeliveryRejected,
    OccurrenceConflict,
    RerunRejected,
    RunAdmitted,
    RunStatusChanged,
    WorkflowRevised,
)
from streams.core.durations import format_duration, format_time
from streams.core.errors import IdentityError, InconsistentHistory
from streams.core.identity import (
    ContentView,
    content_view,
    differing_fields,
    identify,
    run_id_for,
)
from streams.core.lifecycle import (
    BRANCH,
    RUN,
    BranchStatus,
    RunStatus,
    deduplication_reason,
    run_status_from_slots,
)
from streams.core.limits import (
    DEFAULT_CLOCK_UNCERTAINTY_MS,
    MAX_ID_CHARS,
    MAX_RERUN_REASON_CHARS,
    MAX_RERUNS,
)
from streams.core.reasons import (
    REJECT_BEYOND_HORIZON,
    REJECT_IDENTITY_MISMATCH,
    REJECT_INVALID_FIELD,
    REJECT_UNKNOWN_SUBSCRIPTION,
    RERUN_DUPLICATE_REQUEST,
    RERUN_INVALID_REQUEST,
    RERUN_LIMIT,
    RERUN_MISSING_REASON,
    RERUN_UNKNOWN_RUN,
)
from streams.core.refusals import bad_delivery_id, future_refusal, payload_refusal
from streams.core.retention import smallest_retention
from streams.core.workflow import (
    DEFAULT_BRANCH_ATTEMPTS,
    DEFAULT_BRANCH_TIMEOUT_MS,
    workflow_key,
)

__all__ = [
    "DEFAULT_BRANCH_ATTEMPTS",
    "EVICTION_MARGIN_MS",
    "PROCESSOR_WORKER",
    "AdmissionEvent",
    "Admit",
    "BranchReport",
    "CheckTimers",
    "Command",
    "OccurrenceState",
    "RecordBranchReport",
    "Rerun",
    "RunState",
    "SlotState",
    "decide",
    "evolve",
    "next_due_ms",
]

EVICTION_MARGIN_MS = 3_600_000
"""Extra time an admission record is kept beyond ``source time + retention`` (1 hour), so a
copy racing the horizon is still answered by its run rather than rejected."""

PROCESSOR_WORKER = "sluicegate-processor"
"""``worker`` of a ``BranchFailed`` written by the processor when a slot ran out of attempts."""


# --------------------------------------------------------------------------- state


@dataclass(frozen=True)
class SlotState:
    """One launched branch slot of a run: its status, current attempt and timeout."""

    slot: str
    status: BranchStatus
    attempt: int
    timeout_at_ms: int


@dataclass(frozen=True)
class RunState:
    """One run of the occurrence (rerun 0 is the admitted run; reruns count up).

    ``slot_names`` are the slots the run was admitted with; ``slots`` holds the launched ones
    in launch order. ``branch_timeout_ms`` is taken from the run's first ``BranchLaunched``
    (``timeout_at - launched_at``). ``retention_ms`` is the horizon the run was admitted
    under, when the event carries it (``None`` otherwise: the record is then never evicted).
    ``branch_attempts`` and ``clock_uncertainty_ms`` are frozen from ``RunAdmitted``.
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


# --------------------------------------------------------------------------- commands


@dataclass(frozen=True)
class Admit:
    """Decide on one delivery. ``workflow`` is the destination's newest revision, or None."""

    delivery: AdmitDelivery
    workflow: WorkflowRevised | None


@dataclass(frozen=True)
class Rerun:
    """Decide on an authorized rerun. ``workflow`` is the newest revision, or None."""

    request: AuthorizeRerun
    workflow: WorkflowRevised | None


BranchReport: TypeAlias = BranchStarted | BranchCompleted | BranchFailed | BranchSkipped


@dataclass(frozen=True)
class RecordBranchReport:
    """Decide on a branch worker's report for (run, slot, attempt)."""

    report: BranchReport


@dataclass(frozen=True)
class CheckTimers:
    """Fire whatever is due at ``now``: slot timeouts, then (when all is finished) eviction."""


Command: TypeAlias = Admit | Rerun | RecordBranchReport | CheckTimers

AdmissionEvent: TypeAlias = (
    RunAdmitted
    | BranchLaunched
    | BranchRelaunched
    | BranchStarted
    | BranchCompleted
    | BranchFailed
    | BranchSkipped
    | RunStatusChanged
    | DeliveryDeduplicated
    | OccurrenceConflict
    | DeliveryRejected
    | RerunRejected
    | AdmissionRecordEvicted
)


# --------------------------------------------------------------------------- decide


def decide(state: OccurrenceState | None, command: Command, now: int) -> list[AdmissionEvent]:
    """The events that ``command`` causes given ``state`` at ``now`` (epoch ms UTC).

    Never raises for bad input: deliveries that cannot be admitted become
    ``DeliveryRejected``, unusable reports produce no events. Apply the returned events in
    order with :func:`evolve`.
    """
    if isinstance(command, Admit):
        return _decide_admit(state, command, now)
    if isinstance(command, RecordBranchReport):
        return _decide_report(state, command.report, now)
    if isinstance(command, CheckTimers):
        return _decide_timers(state, now)
    return _decide_rerun(state, command, now)


def next_due_ms(state: OccurrenceState | None) -> int | None:
    """When :class:`CheckTimers` next has something to do for ``state`` (epoch ms), or None.

    While any slot is unfinished this is the earliest slot timeout (eviction waits for all
    slots to finish); otherwise it is ``evict_at_ms``. The engine should re-read it after
    every evolve of the state.
    """
    if state is None:
        return None
    due: list[int] = []
    for run in state.runs:
        launched = {s.slot: s for s in run.slots}
        for name in run.slot_names:
            slot = launched.get(name)
            if slot is None:
                due.append(run.admitted_at_ms)
            elif not BRANCH.is_terminal(slot.status):
                due.append(slot.timeout_at_ms)
    if due:
        return min(due)
    return state.evict_at_ms


def _reject(delivery: AdmitDelivery, reason: str, detail: str, now: int) -> list[AdmissionEvent]:
    return [
        DeliveryRejected(
            delivery_id=delivery.delivery_id,
            admission_key=delivery.admission_key,
            subscription=delivery.subscription,
            environment=delivery.environment,
            reason=reason,
            detail=detail,
            received_at_ms=delivery.received_at_ms,
            decided_at_ms=now,
        )
    ]


def _load_object(text: str) -> dict[str, object] | None:
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _decide_admit(state: OccurrenceState | None, command: Admit, now: int) -> list[AdmissionEvent]:
    delivery = command.delivery
    workflow = command.workflow
    destination = workflow_key(delivery.subscription, delivery.environment)
    if workflow is None or workflow_key(workflow.subscription, workflow.environment) != (
        destination
    ):
        return _reject(
            delivery,
            REJECT_UNKNOWN_SUBSCRIPTION,
            f"no workflow is applied for {destination}; apply one with "
            "`sluicegate workflows apply FILE` and publish the delivery again",
            now,
        )

    too_large = payload_refusal(delivery.payload_json)
    if too_large is not None:
        return _reject(delivery, too_large.reason, too_large.describe(), now)
    bad_id = bad_delivery_id(delivery.delivery_id)
    if bad_id is not None:
        return _reject(delivery, REJECT_INVALID_FIELD, bad_id, now)
    payload = _load_object(delivery.payload_json)
    if payload is None:
        return _reject(delivery, REJECT_INVALID_FIELD, "payload_json is not a JSON object", now)
    try:
        occurrence = identify(workflow, payload)
    except IdentityError as exc:
        return _reject(delivery, exc.reason, exc.describe(), now)

    if occurrence.admission_key != delivery.admission_key:
        return _reject(
            delivery,
            REJECT_IDENTITY_MISMATCH,
            f"ingest keyed this delivery {delivery.admission_key!r} but workflow revision "
            f"{workflow.revision} identifies it as {occurrence.admission_key!r}: the "
            "workflow's identity changed between ingest and admission; publish the delivery "
            "again so it is keyed under the current revision",
            now,
        )

    if state is not None:
        return _decide_copy(state, delivery, workflow, payload, now)

    in_future = future_refusal(workflow, occurrence, now)
    if in_future is not None:
        return _reject(delivery, in_future.reason, in_future.describe(), now)
    retention = smallest_retention(workflow, occurrence.source_time_ms, now)
    if occurrence.source_time_ms < now - retention:
        changed = "" if retention == workflow.retention_ms else " (the smallest in effect since)"
        return _reject(
            delivery,
            REJECT_BEYOND_HORIZON,
            f"source time {format_time(occurrence.source_time_ms)} is older than the "
            f"retention horizon ({format_duration(retention)}{changed} before "
            f"{format_time(now)}); admission records are not kept that long, so this copy "
            "cannot be matched to a run and gets none",
            now,
        )

    run_id = run_id_for(occurrence.admission_key, 0)
    admitted = _run_admitted(
        run_id=run_id,
        admission_key=occurrence.admission_key,
        delivery_id=delivery.delivery_id,
        workflow=workflow,
        source=occurrence.source,
        event_id=occurrence.event_id,
        content_digest=occurrence.content_digest,
        source_time_ms=occurrence.source_time_ms,
        expires_at_ms=occurrence.expires_at_ms,
        validity_source_time=workflow.validity_source_time,
        validity_window_ms=workflow.validity_window_ms,
        clock_uncertainty_ms=workflow.clock_uncertainty_ms,
        slots=workflow.slots,
        scope_key=occurrence.scope_key,
        sequence=occurrence.sequence,
        payload_json=occurrence.payload_json,
        rerun_number=0,
        rerun_of=None,
        rerun_reason=None,
        now=now,
    )
    return [admitted, *_launches(admitted, workflow.branch_timeout_ms, now)]


def _decide_copy(
    state: OccurrenceState,
    delivery: AdmitDelivery,
    workflow: WorkflowRevised,
    payload: dict[str, object],
    now: int,
) -> list[AdmissionEvent]:
    original = state.original
    # Compare both copies under the *same* (current) definition: if a redeploy changed the
    # immutable-field list, the stored digest was computed over other fields and comparing
    # it directly would report a conflict that is only a definition change.
    stored_payload = _load_object(original.payload_json) or {}
    before = content_view(workflow, stored_payload)
    now_view = content_view(workflow, payload)
    if before.digest != now_view.digest:
        return [_conflict(state, delivery, before, now_view, now)]
    return [
        DeliveryDeduplicated(
            delivery_id=delivery.delivery_id,
            admission_key=state.admission_key,
            run_id=original.run_id,
            reason=deduplication_reason(original.status),
            received_at_ms=delivery.received_at_ms,
            decided_at_ms=now,
        )
    ]


def _conflict(
    state: OccurrenceState,
    delivery: AdmitDelivery,
    before: ContentView,
    after: ContentView,
    now: int,
) -> OccurrenceConflict:
    return OccurrenceConflict(
        delivery_id=delivery.delivery_id,
        admission_key=state.admission_key,
        run_id=state.original.run_id,
        original_digest=before.digest,
        conflicting_digest=after.digest,
        differing_fields=differing_fields(before, after),
        received_at_ms=delivery.received_at_ms,
        decided_at_ms=now,
    )


def _decide_rerun(state: OccurrenceState | None, command: Rerun, now: int) -> list[AdmissionEvent]:
    request = command.request

    def rejected(reason: str) -> list[AdmissionEvent]:
        return [
            RerunRejected(
                request_id=request.request_id,
                admission_key=request.admission_key,
                run_id=request.run_id,
                reason=reason,
                decided_at_ms=now,
            )
        ]

    if state is None or state.run(request.run_id) is None:
        return rejected(RERUN_UNKNOWN_RUN)
    # A rerun request re-sent by an impatient client must not start a second rerun.
    if any(run.delivery_id == request.request_id for run in state.runs[1:]):
        return rejected(RERUN_DUPLICATE_REQUEST)
    if not request.reason.strip():
        return rejected(RERUN_MISSING_REASON)
    # Bounded so that a state can never outgrow a Kafka message (streams.core.limits).
    if len(request.reason) > MAX_RERUN_REASON_CHARS or len(request.request_id) > MAX_ID_CHARS:
        return rejected(RERUN_INVALID_REQUEST)
    if len(state.runs) - 1 >= MAX_RERUNS:
        return rejected(RERUN_LIMIT)

    original = state.original
    workflow = command.workflow
    if workflow is not None and (workflow.subscription, workflow.environment) != (
        original.subscription,
        original.environment,
    ):
        workflow = None
    rerun_number = len(state.runs)
    admitted = _run_admitted(
        run_id=run_id_for(state.admission_key, rerun_number),
        admission_key=state.admission_key,
        delivery_id=request.request_id,
        workflow=workflow,
        frozen=original,
        source=original.source,
        event_id=original.event_id,
        content_digest=original.content_digest,
        source_time_ms=original.source_time_ms,
        expires_at_ms=original.expires_at_ms,
        validity_source_time=original.validity_source_time,
        validity_window_ms=original.validity_window_ms,
        clock_uncertainty_ms=original.clock_uncertainty_ms,
        slots=workflow.slots if workflow is not None else original.slot_names,
        scope_key=original.scope_key,
        sequence=original.sequence,
        payload_json=original.payload_json,
        rerun_number=rerun_number,
        rerun_of=request.run_id,
        rerun_reason=request.reason,
        now=now,
    )
    timeout = (
        workflow.branch_timeout_ms
        if workflow is not None
        else (original.branch_timeout_ms or DEFAULT_BRANCH_TIMEOUT_MS)
    )
    return [admitted, *_launches(admitted, timeout, now)]


def _decide_report(
    state: OccurrenceState | None, report: BranchReport, now: int
) -> list[AdmissionEvent]:
    if state is None or report.admission_key != state.admission_key:
        return []
    run = state.run(report.run_id)
    if run is None:
        return []
    slot = run.slot(report.slot)
    if slot is None or BRANCH.is_terminal(slot.status):
        return []
    # An attempt number the processor never launched cannot come from a real worker.
    if not 1 <= report.attempt <= slot.attempt:
        return []
    # Only the current attempt's start is news; a late start from a superseded attempt would
    # not change anything the processor acts on.
    if isinstance(report, BranchStarted) and (
        slot.status is not BranchStatus.LAUNCHED or report.attempt != slot.attempt
    ):
        return []
    return _with_status_changes(state, [report], now)


def _decide_timers(state: OccurrenceState | None, now: int) -> list[AdmissionEvent]:
    if state is None:
        return []
    events: list[AdmissionEvent] = []
    current = state
    for run in state.runs:
        slot_events: list[AdmissionEvent] = []
        launched = {s.slot: s for s in run.slots}
        timeout = run.branch_timeout_ms or DEFAULT_BRANCH_TIMEOUT_MS
        for name in run.slot_names:
            slot = launched.get(name)
            if slot is None:
                # Admission and launches are written together, so this only happens if a
                # history lost its launches: launch the missing slot under the same run.
                slot_events.append(_launch(state.admission_key, run, name, timeout, now))
            elif not BRANCH.is_terminal(slot.status) and slot.timeout_at_ms <= now:
                slot_events.append(_expire_slot(state.admission_key, run, slot, timeout, now))
        if slot_events:
            run_events = _with_status_changes(current, slot_events, now)
            current = _fold(current, run_events)
            events.extend(run_events)
    if events:
        return events
    if (
        state.evict_at_ms is not None
        and now >= state.evict_at_ms
        and not any(run.unfinished() for run in state.runs)
    ):
        return [
            AdmissionRecordEvicted(
                admission_key=state.admission_key,
                run_ids=tuple(run.run_id for run in state.runs),
                evicted_at_ms=now,
            )
        ]
    return []


def _expire_slot(
    key: str, run: RunState, slot: SlotState, timeout: int, now: int
) -> AdmissionEvent:
    if slot.attempt < run.branch_attempts:
        return BranchRelaunched(
            run_id=run.run_id,
            admission_key=key,
            slot=slot.slot,
            attempt=slot.attempt + 1,
            workflow_revision=run.workflow_revision,
            expires_at_ms=run.expires_at_ms,
            timeout_at_ms=now + timeout,
            payload_json=run.payload_json,
            reason=f"timed out after {format_duration(timeout)}",
            relaunched_at_ms=now,
        )
    return BranchFailed(
        run_id=run.run_id,
        admission_key=key,
        slot=slot.slot,
        attempt=slot.attempt,
        worker=PROCESSOR_WORKER,
        error=f"no result after {slot.attempt} attempts",
        failed_at_ms=now,
    )


def _with_status_changes(
    state: OccurrenceState, slot_events: Sequence[AdmissionEvent], now: int
) -> list[AdmissionEvent]:
    """``slot_events`` plus a RunStatusChanged for every run whose status they move."""
    after = _fold(state, slot_events)
    events = list(slot_events)
    for before_run, after_run in zip(state.runs, after.runs, strict=False):
        status = run_status_from_slots(after_run.slot_statuses(), before_run.status)
        if status is not before_run.status:
            events.append(
                RunStatusChanged(
                    run_id=before_run.run_id,
                    admission_key=state.admission_key,
                    previous_status=before_run.status.value,
                    status=status.value,
                    changed_at_ms=now,
                )
            )
    return events


def _fold(state: OccurrenceState, events: Iterable[AdmissionEvent]) -> OccurrenceState:
    result: OccurrenceState | None = state
    for event in events:
        result = evolve(result, event)
    if result is None:  # decide never folds an eviction into a further decision
        raise InconsistentHistory(f"{state.admission_key}: state vanished while deciding")
    return result


def _run_admitted(
    *,
    run_id: str,
    admission_key: str,
    delivery_id: str,
    workflow: WorkflowRevised | None,
    source: str,
    event_id: str | None,
    content_digest: str,
    source_time_ms: int,
    expires_at_ms: int,
    validity_source_time: str,
    validity_window_ms: int,
    clock_uncertainty_ms: int,
    slots: tuple[str, ...],
    scope_key: str | None,
    sequence: str | None,
    payload_json: str,
    rerun_number: int,
    rerun_of: str | None,
    rerun_reason: str | None,
    now: int,
    frozen: RunState | None = None,
) -> RunAdmitted:
    """Build RunAdmitted; revision, retention and attempts come from ``workflow``, else
    ``frozen``."""
    retention: int | None
    if workflow is not None:
        revision, retention = workflow.revision, workflow.retention_ms
        subscription, environment = workflow.subscription, workflow.environment
        attempts = workflow.branch_attempts
    elif frozen is not None:
        revision, retention = frozen.workflow_revision, frozen.retention_ms
        subscription, environment = frozen.subscription, frozen.environment
        attempts = frozen.branch_attempts
    else:  # pragma: no cover - callers always pass one of the two
        raise InconsistentHistory(f"{admission_key}: no workflow to admit under")
    return RunAdmitted(
        run_id=run_id,
        admission_key=admission_key,
        delivery_id=delivery_id,
        subscription=subscription,
        environment=environment,
        workflow_revision=revision,
        source=source,
        event_id=event_id,
        content_digest=content_digest,
        source_time_ms=source_time_ms,
        expires_at_ms=expires_at_ms,
        validity_source_time=validity_source_time,
        validity_window_ms=validity_window_ms,
        slots=slots,
        scope_key=scope_key,
        sequence=sequence,
        payload_json=payload_json,
        rerun_number=rerun_number,
        rerun_of=rerun_of,
        rerun_reason=rerun_reason,
        admitted_at_ms=now,
        retention_ms=retention,
        branch_attempts=attempts,
        clock_uncertainty_ms=clock_uncertainty_ms,
    )


def _launches(admitted: RunAdmitted, timeout_ms: int, now: int) -> list[AdmissionEvent]:
    return [
        BranchLaunched(
            run_id=admitted.run_id,
            admission_key=admitted.admission_key,
            slot=slot,
            attempt=1,
            workflow_revision=admitted.workflow_revision,
            expires_at_ms=admitted.expires_at_ms,
            timeout_at_ms=now + timeout_ms,
            payload_json=admitted.payload_json,
            launched_at_ms=now,
        )
        for slot in admitted.slots
    ]


def _launch(key: str, run: RunState, slot: str, timeout_ms: int, now: int) -> BranchLaunched:
    return BranchLaunched(
        run_id=run.run_id,
        admission_key=key,
        slot=slot,
        attempt=1,
        workflow_revision=run.workflow_revision,
        expires_at_ms=run.expires_at_ms,
        timeout_at_ms=now + timeout_ms,
        payload_json=run.payload_json,
        launched_at_ms=now,
    )


# --------------------------------------------------------------------------- evolve


def evolve(state: OccurrenceState | None, event: AdmissionEvent) -> OccurrenceState | None:
    """Apply one event to the state of its admission key.

    Outcome events that do not change the record (deduplicated, conflict, rejected, rerun
    rejected) return ``state`` unchanged, including ``None``. ``AdmissionRecordEvicted``
    returns ``None``. Raises IllegalTransition / InconsistentHistory for an event that
    contradicts the state (see the module docstring).
    """
    if isinstance(
        event, DeliveryDeduplicated | OccurrenceConflict | DeliveryRejected | RerunRejected
    ):
        return state
    if isinstance(event, AdmissionRecordEvicted):
        return None
    if isinstance(event, RunAdmitted):
        return _evolve_admitted(state, event)
    if state is None:
        raise InconsistentHistory(
            f"{event.admission_key}: {type(event).__name__} for run {event.run_id} but the "
            "occurrence has no admission record"
        )
    if event.admission_key != state.admission_key:
        raise InconsistentHistory(
            f"{type(event).__name__} for {event.admission_key} applied to the record of "
            f"{state.admission_key}"
        )
    run = state.run(event.run_id)
    if run is None:
        raise InconsistentHistory(
            f"{state.admission_key}: {type(event).__name__} for unknown run {event.run_id}"
        )
    if isinstance(event, RunStatusChanged):
        if event.previous_status != run.status.value:
            raise InconsistentHistory(
                f"{state.admission_key}: run {run.run_id} is {run.status.value}, event says "
                f"it was {event.previous_status}"
            )
        status = RUN.transition(run.status, _run_status(event.status))
        return _replace_run(state, dataclasses.replace(run, status=status))
    return _replace_run(state, _evolve_slot(state.admission_key, run, event))


_SLOT_OUTCOME: dict[type, BranchStatus] = {
    BranchStarted: BranchStatus.STARTED,
    BranchCompleted: BranchStatus.COMPLETED,
    BranchFailed: BranchStatus.FAILED,
    BranchSkipped: BranchStatus.SKIPPED,
}


def _evolve_slot(
    key: str,
    run: RunState,
    event: BranchLaunched | BranchRelaunched | BranchReport,
) -> RunState:
    if event.slot not in run.slot_names:
        raise InconsistentHistory(
            f"{key}: {type(event).__name__} for slot {event.slot!r}, which run {run.run_id} "
            "does not have"
        )
    slot = run.slot(event.slot)
    if isinstance(event, BranchLaunched):
        if slot is not None:
            BRANCH.transition(slot.status, BranchStatus.LAUNCHED)  # finished: IllegalTransition
            raise InconsistentHistory(f"{key}: slot {event.slot!r} of {run.run_id} launched twice")
        timeout = event.timeout_at_ms - event.launched_at_ms
        new_slot = SlotState(event.slot, BranchStatus.LAUNCHED, event.attempt, event.timeout_at_ms)
        return dataclasses.replace(
            run,
            slots=(*run.slots, new_slot),
            branch_timeout_ms=run.branch_timeout_ms or timeout,
        )
    if slot is None:
        raise InconsistentHistory(
            f"{key}: {type(event).__name__} for slot {event.slot!r} of {run.run_id}, which was "
            "never launched"
        )
    if isinstance(event, BranchRelaunched):
        status = BRANCH.transition(slot.status, BranchStatus.LAUNCHED)
        if event.attempt <= slot.attempt:
            raise InconsistentHistory(
                f"{key}: relaunch of {run.run_id}/{event.slot} as attempt {event.attempt} "
                f"after attempt {slot.attempt}"
            )
        moved = SlotState(slot.slot, status, event.attempt, event.timeout_at_ms)
    else:
        status = BRANCH.transition(slot.status, _SLOT_OUTCOME[type(event)])
        moved = dataclasses.replace(slot, status=status)
    return dataclasses.replace(
        run, slots=tuple(moved if s.slot == slot.slot else s for s in run.slots)
    )


def _evolve_admitted(state: OccurrenceState | None, event: RunAdmitted) -> OccurrenceState:
    expected = 0 if state is None else len(state.runs)
    if event.rerun_number != expected:
        raise InconsistentHistory(
            f"{event.admission_key}: RunAdmitted {event.run_id} is rerun "
            f"{event.rerun_number}, expected rerun {expected}"
        )
    if state is not None and event.admission_key != state.admission_key:
        raise InconsistentHistory(
            f"RunAdmitted for {event.admission_key} applied to the record of {state.admission_key}"
        )
    run = RunState(
        run_id=event.run_id,
        rerun_number=event.rerun_number,
        status=RunStatus.PENDING,
        workflow_revision=event.workflow_revision,
        delivery_id=event.delivery_id,
        subscription=event.subscription,
        environment=event.environment,
        source=event.source,
        event_id=event.event_id,
        content_digest=event.content_digest,
        source_time_ms=event.source_time_ms,
        expires_at_ms=event.expires_at_ms,
        validity_source_time=event.validity_source_time,
        validity_window_ms=event.validity_window_ms,
        scope_key=event.scope_key,
        sequence=event.sequence,
        payload_json=event.payload_json,
        slot_names=tuple(event.slots),
        slots=(),
        branch_timeout_ms=0,
        retention_ms=event.retention_ms,  # None in v1 records: never evicted
        rerun_of=event.rerun_of,
        rerun_reason=event.rerun_reason,
        admitted_at_ms=event.admitted_at_ms,
        branch_attempts=event.branch_attempts,
        clock_uncertainty_ms=event.clock_uncertainty_ms,
    )
    runs = (run,) if state is None else (*state.runs, run)
    return OccurrenceState(event.admission_key, runs, _evict_at(runs))


def _evict_at(runs: tuple[RunState, ...]) -> int | None:
    retentions = [run.retention_ms for run in runs if run.retention_ms is not None]
    if not retentions:
        return None
    return runs[0].source_time_ms + max(retentions) + EVICTION_MARGIN_MS


def _replace_run(state: OccurrenceState, run: RunState) -> OccurrenceState:
    runs = tuple(run if r.run_id == run.run_id else r for r in state.runs)
    return dataclasses.replace(state, runs=runs)


def _run_status(value: str) -> RunStatus:
    try:
        return RunStatus(value)
    except ValueError as exc:
        raise InconsistentHistory(f"unknown run status {value!r}") from exc
