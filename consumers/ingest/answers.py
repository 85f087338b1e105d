"""The webhook's answers: a refused intake as its HTTP refusal, and JSON responses.

Every refusal is chosen by the core's reason code (never by reading a message) and lists one
problem per field, rendered from the core's structure; nothing here is produced to Kafka.
"""

from __future__ import annotations

from collections.abc import Mapping

import orjson
from aiohttp import web

from consumers.ingest.errors import (
    CloudEventRequired,
    CloudEventsNotEnabled,
    InvalidCloudEvent,
    InvalidRequest,
    MissingIdentityFields,
    PayloadTooLarge,
    Problem,
    RequestRefused,
    SourceTimeInFuture,
    shorten,
)
from streams.core.errors import FieldRole, Refusal
from streams.core.reasons import (
    REFUSE_CLOUDEVENT_REQUIRED,
    REFUSE_CLOUDEVENTS_NOT_ENABLED,
    REFUSE_INVALID_CLOUDEVENT,
    REJECT_INVALID_FIELD,
    REJECT_MISSING_FIELDS,
    REJECT_PAYLOAD_TOO_LARGE,
    REJECT_SOURCE_TIME_IN_FUTURE,
)


def refused(refusal: Refusal) -> RequestRefused:
    """The answer to a refused intake, chosen by its reason code."""
    problems = problems_of(refusal)
    if refusal.reason == REFUSE_INVALID_CLOUDEVENT:
        return InvalidCloudEvent("the event is not a valid CloudEvents 1.0 event", problems)
    if refusal.reason == REFUSE_CLOUDEVENTS_NOT_ENABLED:
        return CloudEventsNotEnabled("this destination does not take CloudEvents", problems)
    if refusal.reason == REFUSE_CLOUDEVENT_REQUIRED:
        return CloudEventRequired("this destination takes CloudEvents only", problems)
    if refusal.reason in (REJECT_MISSING_FIELDS, REJECT_INVALID_FIELD):
        return MissingIdentityFields(
            "the body lacks, or has unreadable, fields the workflow needs", problems
        )
    if refusal.reason == REJECT_PAYLOAD_TOO_LARGE:
        return PayloadTooLarge("the payload is larger than admission keeps", problems)
    if refusal.reason == REJECT_SOURCE_TIME_IN_FUTURE:
        return SourceTimeInFuture(
            "the source time is in the future: send the signal once it has passed", problems
        )
    return InvalidRequest(refusal.reason, problems)


def problems_of(refusal: Refusal) -> list[Problem]:
    """One problem per field, rendered from the core's structure: what the field is for and
    what is wrong with it (the message may quote the sender's own value: kept short)."""
    problems = [
        Problem("body" if p.role is FieldRole.PAYLOAD else p.field, shorten(p.explain()))
        for p in refusal.problems
    ]
    return problems or [Problem("body", shorten(refusal.detail))]


def json_response(
    body: Mapping[str, object], status: int, headers: Mapping[str, str] | None = None
) -> web.Response:
    return web.Response(
        body=orjson.dumps(body),
        status=status,
        content_type="application/json",
        headers=headers,
    )
