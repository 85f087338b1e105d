"""The action journal's events, written by the gateway (``streams.core.journal``).

Written to the ``journal`` topic, keyed by run id. Action ids are ``f"{run_id}.{slot}"``
(slot: entry, exit, protection, notification); the client order id is the same for every
attempt of one action. Quantities and prices are decimal strings; structured values are
canonical JSON in ``*_json`` fields.
"""

from __future__ import annotations

from dataclasses import dataclass

from schemas.direct_init import direct_init


@direct_init
@dataclass(frozen=True)
class ActionIntended:
    """The journal recorded an action's exact authorized parameters, before any attempt.

    For an entry or exit this is the gate's dispatch; a protection is intended only once the
    entry's receipt shows exposure, sized from the exposure the venue reported
    (``sized_from_json``); a notification once the actions before it are settled or held.
    The deadline copy and the venue timing policy are frozen here: recovery re-checks against
    these values, never against newer settings.
    """

    action_id: str
    run_id: str
    slot: str
    client_order_id: str
    side: str | None
    quantity: str | None
    notional: str | None
    limit_price: str | None
    params_json: str
    protection_json: str | None
    notification_json: str | None
    instrument: str
    venue: str
    account: str
    environment: str
    generation: int
    expires_at_ms: int
    source_time_ms: int
    validity_source_time: str
    validity_window_ms: int
    clock_uncertainty_ms: int
    workflow_revision: int
    authorized_until_ms: int | None
    depends_on: str | None
    sized_from_json: str | None
    recv_window_ms: int
    quiet_period_ms: int
    send_timeout_ms: int
    lookup_interval_ms: int
    reconciliation_budget_ms: int
    followup_window_ms: int
    dispatched_at_ms: int | None
    intended_at_ms: int


@direct_init
@dataclass(frozen=True)
class AttemptStarted:
    """Dispatch-start: committed before the request may leave; nothing is sent without it.

    ``request_json`` is exactly what the gateway sends; ``attempted_at_ms`` is the request's
    ``timestamp`` and ``recv_window_ms`` its ``recvWindow``, so the venue refuses it after
    ``attempted_at_ms + recv_window_ms``. From this record on, the attempt counts as possibly
    effective until a receipt resolves it; "not found" proves absence only when the lookup was
    made at or after ``absence_after_ms``.
    """

    action_id: str
    run_id: str
    slot: str
    attempt: int
    client_order_id: str
    venue: str
    account: str
    instrument: str
    request_json: str
    attempted_at_ms: int
    recv_window_ms: int
    send_by_ms: int
    absence_after_ms: int
    owner_instance: str
    owner_generation: int
    reason: str


@direct_init
@dataclass(frozen=True)
class ReceiptRecorded:
    """What is now established about an attempt, from the send's answer or a lookup.

    ``outcome``: ``acknowledged`` (accepted, open), ``filled`` (executions, done), ``rejected``
    (refused, nothing live), ``unknown`` (not established yet; reconciliation continues) or
    ``absent`` (proven never to have taken effect). ``source`` is ``send_response``,
    ``reconciliation`` or ``gateway`` (the gateway did not send a stale attempt). A receipt
    never overwrites an earlier one; ``conflict`` names evidence that contradicts it.
    """

    action_id: str
    run_id: str
    slot: str
    attempt: int
    client_order_id: str
    outcome: str
    venue_order_id: str | None
    status: str | None
    executed_quantity: str | None
    fills_json: str | None
    source: str
    queried_at_ms: int | None
    observed_at_ms: int
    conflict: str | None
    error_code: str | None
    detail: str | None
    recorded_at_ms: int


@direct_init
@dataclass(frozen=True)
class ActionExpired:
    """An action that never took effect will not be sent: its deadline or authorization lapsed.

    ``reason``: ``expired_before_send`` (``checked_at + clock_uncertainty >= expires_at``) or
    ``authorization_lapsed``. ``attempts`` is 0 for a never-attempted action, else the number
    of attempts that were all proven absent.
    """

    action_id: str
    run_id: str
    slot: str
    reason: str
    attempts: int
    expires_at_ms: int
    authorized_until_ms: int | None
    clock_uncertainty_ms: int
    checked_at_ms: int


@direct_init
@dataclass(frozen=True)
class ActionHeld:
    """An action needs an operator: nothing is sent for it until the hold is resolved.

    ``owner`` is the gateway instance that owned the run when it held the action; ``reason``
    is machine-readable (``reconciliation_budget_exhausted``, ``exposure_unavailable``,
    ``conflicting_evidence``, ``invalid_dispatch``).
    """

    action_id: str
    run_id: str
    slot: str
    attempt: int
    owner: str
    reason: str
    detail: str
    held_since_ms: int


@direct_init
@dataclass(frozen=True)
class HoldResolved:
    """A hold ended (audit record): by an operator's ``ResolveHold`` or by later evidence.

    ``resolution``: ``retry_lookup``, ``confirm_absent``, ``abandon`` or ``evidence``.
    """

    action_id: str
    run_id: str
    slot: str
    resolution: str
    resolved_by: str
    reason: str
    held_reason: str
    held_since_ms: int
    resolved_at_ms: int


@direct_init
@dataclass(frozen=True)
class RunCheckpointed:
    """The run's durable progress: saved observations of settled work and the next tasks.

    A checkpoint says what may come next; it never authorizes a send by itself: an action with
    a newer ``AttemptStarted`` is reconciled, whatever its checkpoint says.
    """

    run_id: str
    checkpoint_id: str
    sequence: int
    workflow_revision: int
    completed_json: str
    next_tasks: tuple[str, ...]
    checkpointed_at_ms: int


@direct_init
@dataclass(frozen=True)
class QueryRequested:
    """A reconciliation step: the gateway asks the venue, after this record commits.

    ``query``: ``order`` (look the client order id up) or ``exposure`` (the account's
    position in the instrument, to size a protection). ``query_number`` counts the action's
    queries from 1.
    """

    action_id: str
    run_id: str
    slot: str
    query: str
    query_number: int
    client_order_id: str
    venue: str
    account: str
    instrument: str
    reason: str
    requested_at_ms: int


@direct_init
@dataclass(frozen=True)
class ExposureRecorded:
    """The venue's report of the run's exposure, recorded as a new timestamped observation.

    ``sized_quantity`` = min(reported exposure, the entry's executed quantity net of the
    commission charged in ``asset``, which ``entry_executed_quantity`` records), rounded down to
    ``lot_step`` when the venue stated one: what the protection will cover (``"0"``: no
    protection is needed, or less than one step is held).
    """

    action_id: str
    run_id: str
    entry_action_id: str
    asset: str | None
    exposure_quantity: str
    entry_executed_quantity: str
    sized_quantity: str
    queried_at_ms: int
    observed_at_ms: int
    recorded_at_ms: int
    lot_step: str | None = None


@direct_init
@dataclass(frozen=True)
class RecoveryStarted:
    """One recovery owner took a run: what it restored, consulted and routed to lookup.

    ``journal_origin`` is ``live`` (the committed journal) or anything else (restored from an
    older point): then "not found" proves nothing before ``absence_not_before_ms`` and every
    action is looked up before any attempt.
    """

    run_id: str
    recovery_id: str
    requested_by: str
    reason: str
    journal_origin: str
    owner_instance: str
    owner_generation: int
    checkpoint_id: str | None
    records_consulted: tuple[str, ...]
    routed_to_lookup: tuple[str, ...]
    absence_not_before_ms: int | None
    supersedes: str | None
    started_at_ms: int


@direct_init
@dataclass(frozen=True)
class RecoveryReceiptRecorded:
    """Recovery is complete: the checkpoint restored, the journal records consulted, the
    current external evidence (new observations, each with its own time) and what may happen
    next. Earlier observations are never rewritten."""

    run_id: str
    recovery_id: str
    checkpoint_id: str | None
    records_consulted: tuple[str, ...]
    evidence_json: str
    next_permitted: tuple[str, ...]
    checkpoint_advanced_to: str | None
    held: tuple[str, ...]
    recorded_at_ms: int


@direct_init
@dataclass(frozen=True)
class JournalEvicted:
    """A finished run's journal left the gateway's state; its changelog key is tombstoned.

    Written only when every action is settled, no recovery is open, the checkpoint names no
    next task, and both the run's deadline horizon (``expires_at - clock_uncertainty``: no
    attempt of its dispatch can be made after it, whatever approval validity is configured)
    and its last record lie ``retention_ms`` in the past. A repeat of the run's dispatch read
    afterwards is more than an hour past its send horizon (the retention is at least 2 h), so
    it is refused (``DispatchRefused``), never intended or sent. ``actions`` lists
    ``action_id=status`` of every action of the run when it left.
    """

    run_id: str
    actions: tuple[str, ...]
    deadline_horizon_ms: int
    last_record_at_ms: int
    retention_ms: int
    evicted_at_ms: int


@direct_init
@dataclass(frozen=True)
class DispatchRefused:
    """A dispatch of a run the gateway keeps no journal of, read an hour or more after its
    send horizon: nothing intended, nothing sent.

    ``reason`` is ``beyond_horizon``: ``refused_at_ms >= send_horizon_ms + 1 h``, where the
    send horizon is ``min(expires_at_ms, authorized_until_ms) - clock_uncertainty_ms``. The
    run may have been journalled and evicted already (this is a repeat of its dispatch), and
    in any case its deadline or approval lapsed long ago. The refusal changes no state.
    """

    action_id: str
    run_id: str
    kind: str
    reason: str
    expires_at_ms: int
    authorized_until_ms: int | None
    clock_uncertainty_ms: int
    send_horizon_ms: int
    dispatched_at_ms: int
    refused_at_ms: int
