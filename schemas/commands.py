"""Commands: requests that the processor decides on, named in the imperative.

Mirrored 1:1 by ``schemas/avro/<ClassName>.avsc`` like the events. A command is not a fact:
it may be refused, and its outcome is an event.
"""

from __future__ import annotations

from dataclasses import dataclass

from schemas.direct_init import direct_init


@direct_init
@dataclass(frozen=True)
class AdmitDelivery:
    """One delivery attempt of an occurrence, keyed by its admission key.

    ``payload_json`` holds the delivered fields as canonical JSON (sorted keys, no spaces).
    ``admission_key`` is computed at ingest from the workflow's identity fields; when the
    identity could not be derived there it is ``subscription/environment/!delivery_id`` so
    that the processor can still record the rejection.
    """

    delivery_id: str
    subscription: str
    environment: str
    admission_key: str
    source: str
    event_id: str | None
    payload_json: str
    received_at_ms: int
    channel: str


@direct_init
@dataclass(frozen=True)
class AuthorizeRerun:
    """An operator's authorized rerun of a run: admits a new run linked to the original."""

    request_id: str
    admission_key: str
    run_id: str
    reason: str
    requested_by: str
    requested_at_ms: int


# --------------------------------------------------------------------------- action journal
#
# Decided by the gateway (streams.core.journal), keyed by run id. Operators send RecoverRun
# and ResolveHold on ``actions``; the gateway feeds the answers of its own requests back as
# VenueAnswered, LookupAnswered and ExposureObserved.


@direct_init
@dataclass(frozen=True)
class ReportBranchStarted:
    """A branch worker's claim that it took the task for (run, slot, attempt).

    Produced by the worker SDK to ``branch-results``; admission accepts it once (as
    ``BranchStarted`` on ``runs``) or not at all (a finished slot, a stale attempt).
    """

    run_id: str
    admission_key: str
    slot: str
    attempt: int
    worker: str
    started_at_ms: int


@direct_init
@dataclass(frozen=True)
class ReportBranchCompleted:
    """A branch worker's claim that (run, slot, attempt) finished with a result; accepted once
    per (run, slot) as ``BranchCompleted``."""

    run_id: str
    admission_key: str
    slot: str
    attempt: int
    worker: str
    result_json: str
    completed_at_ms: int


@direct_init
@dataclass(frozen=True)
class ReportBranchFailed:
    """A branch worker's claim that (run, slot, attempt) gave up with an error; accepted once
    per (run, slot) as ``BranchFailed``."""

    run_id: str
    admission_key: str
    slot: str
    attempt: int
    worker: str
    error: str
    failed_at_ms: int


@direct_init
@dataclass(frozen=True)
class ReportBranchSkipped:
    """A branch worker's claim that (run, slot, attempt) decided not to act (e.g. expired at
    dequeue); accepted once per (run, slot) as ``BranchSkipped``."""

    run_id: str
    admission_key: str
    slot: str
    attempt: int
    worker: str
    reason: str
    skipped_at_ms: int


@direct_init
@dataclass(frozen=True)
class RecoverRun:
    """Recover a run: restore its checkpoint, consult its journal, reconcile, then continue.

    ``journal_origin``: ``live`` when the journal is the committed one; ``backup`` (or any
    other value) when it was restored from an older point, which makes the gateway look every
    action up before sending anything.
    """

    request_id: str
    run_id: str
    requested_by: str
    reason: str
    requested_at_ms: int
    journal_origin: str = "live"


@direct_init
@dataclass(frozen=True)
class ResolveHold:
    """An operator's resolution of a held action: ``retry_lookup``, ``confirm_absent`` or
    ``abandon``."""

    request_id: str
    run_id: str
    action_id: str
    resolution: str
    reason: str
    operator: str
    requested_at_ms: int


@direct_init
@dataclass(frozen=True)
class VenueAnswered:
    """The answer to a send (an ``AttemptStarted``'s request).

    ``outcome``: ``acknowledged``, ``filled``, ``rejected``, ``unknown`` (timeout, 5xx,
    "execution status unknown") or ``not_sent`` (the gateway refused to send a stale attempt).
    """

    run_id: str
    action_id: str
    attempt: int
    client_order_id: str
    outcome: str
    venue_order_id: str | None
    status: str | None
    executed_quantity: str | None
    fills_json: str | None
    error_code: str | None
    detail: str | None
    observed_at_ms: int


@direct_init
@dataclass(frozen=True)
class LookupAnswered:
    """The answer to an order lookup by client order id (a ``QueryRequested`` of ``order``).

    ``outcome``: ``acknowledged``, ``filled``, ``rejected`` (found, in that state),
    ``not_found`` or ``unknown`` (the lookup itself failed). ``queried_at_ms`` is when the
    query was sent: "not found" proves absence only from the attempt's ``absence_after_ms``.
    """

    run_id: str
    action_id: str
    query_number: int
    client_order_id: str
    outcome: str
    venue_order_id: str | None
    status: str | None
    executed_quantity: str | None
    fills_json: str | None
    detail: str | None
    queried_at_ms: int
    observed_at_ms: int


@direct_init
@dataclass(frozen=True)
class ExposureObserved:
    """The answer to an exposure query: the account's position in the run's instrument.

    ``outcome``: ``observed`` (``exposure_quantity`` is set) or ``unknown`` (query failed).
    ``lot_step`` is the symbol's quantity step as the venue states it (Binance's LOT_SIZE
    ``stepSize``), ``None`` when it does not; a protection is rounded down to it.
    """

    run_id: str
    action_id: str
    query_number: int
    outcome: str
    asset: str | None
    exposure_quantity: str | None
    detail: str | None
    queried_at_ms: int
    observed_at_ms: int
    lot_step: str | None = None
