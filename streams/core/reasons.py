"""The machine-readable reasons of admission outcomes: one vocabulary for every reader.

These strings appear unchanged in ``DeliveryRejected.reason`` / ``RerunRejected.reason``, in
the webhook's and ``sluicegate publish``'s refusals of the same cases, in the projections'
``rejected`` counts and in the README. Add freely; never rename one (scripts count them).
"""

from __future__ import annotations

REJECT_UNKNOWN_SUBSCRIPTION = "unknown_subscription"
"""No workflow is applied for the delivery's destination."""
REJECT_MISSING_FIELDS = "missing_identity_fields"
"""A field the workflow needs (identity, source time, scope, sequence, ``source``) is absent."""
REJECT_INVALID_FIELD = "invalid_field"
"""A field the workflow reads is unreadable (wrong type, control characters, too long, ...)."""
REJECT_IDENTITY_MISMATCH = "identity_mismatch"
"""The delivery was keyed under another identity than the processor derives from it."""
REJECT_BEYOND_HORIZON = "beyond_horizon"
"""The source time is older than the redelivery horizon; no record could match it."""
REJECT_SOURCE_TIME_IN_FUTURE = "source_time_in_future"
"""The source time is later than ``now + clock_uncertainty``."""
REJECT_PAYLOAD_TOO_LARGE = "payload_too_large"
"""The payload, as canonical JSON, is larger than admission keeps."""
CANNOT_BE_RECORDED = "cannot_be_recorded"
"""The decision's events or state could not be written (e.g. over the broker's message size):
the engine dead-lettered the input and answered it with this reason (deliveries and reruns)."""

DELIVERY_REJECTION_REASONS = (
    REJECT_UNKNOWN_SUBSCRIPTION,
    REJECT_MISSING_FIELDS,
    REJECT_INVALID_FIELD,
    REJECT_IDENTITY_MISMATCH,
    REJECT_BEYOND_HORIZON,
    REJECT_SOURCE_TIME_IN_FUTURE,
    REJECT_PAYLOAD_TOO_LARGE,
    CANNOT_BE_RECORDED,
)
"""Every ``DeliveryRejected.reason``."""

REFUSE_INVALID_CLOUDEVENT = "invalid_cloudevent"
"""A front door's refusal, never a ``DeliveryRejected``: the event breaks the CloudEvents 1.0
spec (a required attribute missing or empty, another ``specversion``, an invalid ``time``, ...)."""
REFUSE_CLOUDEVENTS_NOT_ENABLED = "cloudevents_not_enabled"
"""A front door's refusal: a CloudEvent sent to a destination whose workflow does not take them."""
REFUSE_CLOUDEVENT_REQUIRED = "cloudevent_required"
"""A front door's refusal: a plain body sent to a destination that takes CloudEvents only."""

FRONT_DOOR_REFUSALS = (
    REFUSE_INVALID_CLOUDEVENT,
    REFUSE_CLOUDEVENTS_NOT_ENABLED,
    REFUSE_CLOUDEVENT_REQUIRED,
)
"""Reasons only the front doors give: the delivery is never produced, so never decided."""

RERUN_UNKNOWN_RUN = "unknown_run"
"""The run to rerun is not in the occurrence's record (or the record is gone)."""
RERUN_DUPLICATE_REQUEST = "duplicate_request"
"""This request id already admitted a rerun."""
RERUN_MISSING_REASON = "missing_reason"
"""The request gives no reason."""
RERUN_INVALID_REQUEST = "invalid_request"
"""The request's id or reason is longer than admission keeps."""
RERUN_LIMIT = "rerun_limit"
"""The occurrence already has the most reruns admission keeps."""

RERUN_REJECTION_REASONS = (
    RERUN_UNKNOWN_RUN,
    RERUN_DUPLICATE_REQUEST,
    RERUN_MISSING_REASON,
    RERUN_INVALID_REQUEST,
    RERUN_LIMIT,
    CANNOT_BE_RECORDED,
)
"""Every ``RerunRejected.reason``."""
