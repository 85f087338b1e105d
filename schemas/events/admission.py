"""Run admission's events: workflow revisions and what admission decided for each delivery.

Written to ``workflows`` (``WorkflowRevised``, keyed by destination) and ``runs`` (the rest,
keyed by admission key) by ``sluicegate workflows apply`` and the admission app. Rules:
``streams.core.admission``.
"""

from __future__ import annotations

from dataclasses import dataclass

from schemas.direct_init import direct_init


@direct_init
@dataclass(frozen=True)
class WorkflowRevised:
    """A workflow destination (subscription x environment) got a new revision.

    Lives on the compacted ``workflows`` topic keyed by ``subscription/environment``; the
    newest revision per key is the one new occurrences are admitted under. A run keeps the
    revision it was admitted with (frozen context).

    v2 adds ``branch_attempts``, ``clock_uncertainty_ms``, ``identity_case_sensitive_fields``
    and ``retention_history``: every retention period still able to matter, oldest first, as
    ``"<from epoch ms>:<retention ms>"`` (the last one is ``retention_ms``), so that a
    delivery with no admission record is judged against the smallest retention in effect
    since its source time. v1 records decode with 3 attempts, 250 ms, no case-sensitive
    fields and an empty history (meaning: ``retention_ms`` since ``applied_at_ms``).

    v3 adds ``identity_envelope``: ``"cloudevents"`` when the destination takes CloudEvents
    1.0 (its occurrence identity is the event's ``source`` + ``id``, its field names are
    context attributes or ``data.<member>``), else ``None``. Older records decode with ``None``.

    v4 adds ``[workflow.actions]``: ``action_propose_slot`` (the slot whose result proposes an
    action), ``action_approve_slots`` (slots that must complete before dispatch) and
    ``action_exit_window_ms`` (non-entry actions' deadline from the source time; null: none
    at the gate). Older records decode with no actions.
    """

    subscription: str
    environment: str
    revision: int
    slots: tuple[str, ...]
    branch_timeout_ms: int
    retention_ms: int
    identity_event_id_field: str | None
    identity_derived_fields: tuple[str, ...]
    immutable_fields: tuple[str, ...]
    validity_source_time: str
    validity_window_ms: int
    scope_fields: tuple[str, ...]
    scope_sequence_field: str | None
    auth_token_env: str | None
    auth_hmac_secret_env: str | None
    definition_digest: str
    applied_at_ms: int
    # v2
    branch_attempts: int = 3
    clock_uncertainty_ms: int = 250
    identity_case_sensitive_fields: tuple[str, ...] = ()
    retention_history: tuple[str, ...] = ()
    # v3
    identity_envelope: str | None = None
    # v4
    action_propose_slot: str | None = None
    action_approve_slots: tuple[str, ...] = ()
    action_exit_window_ms: int | None = None


@direct_init
@dataclass(frozen=True)
class RunAdmitted:
    """An occurrence was admitted for a destination: the one durable run it gets.

    ``run_id`` is deterministic (admission key + rerun number). ``workflow_revision`` is the
    frozen context. ``expires_at_ms`` is the absolute deadline from the source time and the
    validity policy; nothing downstream may extend it. ``branch_attempts`` and
    ``clock_uncertainty_ms`` (v3) are frozen with the run: the most launches per slot and the
    clock uncertainty of its deadline policy. Older records decode with 3 and 250 ms.

    v4 freezes the action policy: ``action_propose_slot`` (whose result may propose the run's
    action), ``action_approve_slots`` (which must complete before it is dispatched),
    ``action_exit_window_ms`` and ``generation_kind`` (``time`` or ``number``: how the run's
    generation, its sequence value or else its source time, is ordered at the gate), so a
    redeploy never changes what a run may do. Older records decode with no actions.
    """

    run_id: str
    admission_key: str
    delivery_id: str
    subscription: str
    environment: str
    workflow_revision: int
    source: str
    event_id: str | None
    content_digest: str
    source_time_ms: int
    expires_at_ms: int
    validity_source_time: str
    validity_window_ms: int
    slots: tuple[str, ...]
    scope_key: str | None
    sequence: str | None
    payload_json: str
    rerun_number: int
    rerun_of: str | None
    rerun_reason: str | None
    admitted_at_ms: int
    # v2: the retention horizon the run was admitted under, so that eviction can be derived
    # from the events alone. Absent (None) in v1 records: those are never evicted.
    retention_ms: int | None = None
    # v3
    branch_attempts: int = 3
    clock_uncertainty_ms: int = 250
    # v4: the action policy, frozen with the run
    action_propose_slot: str | None = None
    action_approve_slots: tuple[str, ...] = ()
    action_exit_window_ms: int | None = None
    generation_kind: str | None = None


@direct_init
@dataclass(frozen=True)
class RunStatusChanged:
    """The run's status moved (pending -> running -> completed | skipped | failed)."""

    run_id: str
    admission_key: str
    previous_status: str
    status: str
    changed_at_ms: int


@direct_init
@dataclass(frozen=True)
class DeliveryDeduplicated:
    """A delivery of an already-admitted occurrence; answered with the existing run.

    ``reason`` is the run's state when the copy arrived: ``in_flight`` (pending or running),
    ``completed``, ``skipped`` or ``failed``.
    """

    delivery_id: str
    admission_key: str
    run_id: str
    reason: str
    received_at_ms: int
    decided_at_ms: int


@direct_init
@dataclass(frozen=True)
class OccurrenceConflict:
    """Same occurrence identity, different immutable content. The original run is untouched."""

    delivery_id: str
    admission_key: str
    run_id: str
    original_digest: str
    conflicting_digest: str
    differing_fields: tuple[str, ...]
    received_at_ms: int
    decided_at_ms: int


@direct_init
@dataclass(frozen=True)
class DeliveryRejected:
    """A delivery that gets no run, with a machine-readable reason.

    Reasons (:mod:`streams.core.reasons`): ``beyond_horizon``, ``unknown_subscription``,
    ``missing_identity_fields``, ``invalid_field``, ``identity_mismatch``,
    ``source_time_in_future``, ``payload_too_large``, ``cannot_be_recorded``.
    """

    delivery_id: str
    admission_key: str
    subscription: str
    environment: str
    reason: str
    detail: str
    received_at_ms: int
    decided_at_ms: int


@direct_init
@dataclass(frozen=True)
class RerunRejected:
    """An authorized rerun request that could not be honoured.

    Reasons: ``unknown_run``, ``duplicate_request``, ``missing_reason``, ``invalid_request``
    (id or reason too long), ``rerun_limit`` (the occurrence has the most reruns kept).
    """

    request_id: str
    admission_key: str
    run_id: str
    reason: str
    decided_at_ms: int


@direct_init
@dataclass(frozen=True)
class AdmissionRecordEvicted:
    """An occurrence's admission record left the processor's state after its horizon.

    Written only once ``source time + retention + margin`` has passed, so any later copy is
    already beyond the horizon and is rejected rather than admitted again.
    """

    admission_key: str
    run_ids: tuple[str, ...]
    evicted_at_ms: int
