"""Errors of the webhook front door.

Two kinds:

- :class:`RequestRefused` and its subclasses are *answers*: a request the front door refuses
  on purpose. Each carries the HTTP status, a stable machine-readable ``code``, a message
  for the sender and, where several things are wrong at once, ``problems`` (one
  ``{"field", "message"}`` per problem). None of them is ever raised after anything was
  produced to Kafka, and none of their messages contains a secret, a token or a body value.
  ``detail``, when set, is for ingest's log only (the access line's ``detail`` field): it
  says why to the operator what the answer must not say to the caller.
- :class:`IngestSettingsError` is an operator error at start-up (a bad ``SLUICEGATE_INGEST_*``
  value); the CLI prints it and exits non-zero.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from consumers.errors import ConsumersError


class IngestError(ConsumersError):
    """Root of every error the ingest package raises on purpose."""


class IngestSettingsError(IngestError):
    """A ``SLUICEGATE_INGEST_*`` setting has a value ingest cannot use; the message names it."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a request: where (``field``) and what (``message``)."""

    field: str
    message: str

    def as_json(self) -> dict[str, str]:
        return {"field": self.field, "message": self.message}


class RequestRefused(IngestError):
    """A request answered with a 4xx/5xx error body ``{"error": {code, message, problems}}``."""

    status: int = 400
    code: str = "bad_request"

    def __init__(
        self,
        message: str,
        problems: Sequence[Problem] = (),
        *,
        headers: Mapping[str, str] | None = None,
        detail: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.problems: tuple[Problem, ...] = tuple(problems)
        self.headers: dict[str, str] = dict(headers or {})
        self.detail = detail

    def body(self) -> dict[str, object]:
        """The JSON error body of the contract."""
        return {
            "error": {
                "code": self.code,
                "message": self.message,
                "problems": [p.as_json() for p in self.problems],
            }
        }


class BadRequest(RequestRefused):
    """The HTTP message itself is broken (e.g. a malformed chunked body)."""

    status = 400
    code = "bad_request"


class MalformedRequest(BadRequest):
    """The bytes are not an HTTP/1.1 request aiohttp can parse: the request line, a header or
    the framing (``malformed.py``). Answered before any route runs; the connection closes."""

    code = "malformed_request"


class RequestHeadTooLarge(BadRequest):
    """The request line or a header is over 8,190 bytes, or there are over 128 headers."""

    code = "request_head_too_large"


class RouteNotFound(RequestRefused):
    """No such route (an unknown destination is :class:`Unauthorized`, never a 404)."""

    status = 404
    code = "not_found"


class MethodNotAllowed(RequestRefused):
    """The route exists but not for this HTTP method."""

    status = 405
    code = "method_not_allowed"


class RequestTimeout(RequestRefused):
    """The client did not finish sending its body in time."""

    status = 408
    code = "request_timeout"


UNAUTHORIZED_MESSAGE = "not authorized to post here; the reason is in ingest's log"


class Unauthorized(RequestRefused):
    """The caller may not post to this destination, for whatever reason: no such destination,
    an unset secret variable, missing, malformed, wrong, expired or replayed credentials.

    Every instance answers the same body (:data:`UNAUTHORIZED_MESSAGE`), so that an
    unauthenticated caller learns nothing about what is configured; the reason is ``detail``
    (also ``str(error)``), which goes to ingest's log and never contains a secret.
    """

    status = 401
    code = "unauthorized"

    def __init__(self, detail: str) -> None:
        super().__init__(UNAUTHORIZED_MESSAGE, detail=detail)

    def __str__(self) -> str:
        return self.detail or self.message


class PayloadTooLarge(RequestRefused):
    """The body is larger than ``SLUICEGATE_INGEST_MAX_BODY_BYTES``, or the payload (as
    canonical JSON) larger than admission keeps."""

    status = 413
    code = "payload_too_large"


class UnsupportedMediaType(RequestRefused):
    """The body is neither ``application/json`` nor ``text/plain`` (or not UTF-8)."""

    status = 415
    code = "unsupported_media_type"


class InvalidRequest(RequestRefused):
    """The request is readable but wrong: bad query parameter, body or identity fields."""

    status = 422
    code = "invalid_request"


class InvalidEnvironment(InvalidRequest):
    """``?env=`` is not one of the environments."""

    code = "invalid_environment"


class InvalidBody(InvalidRequest):
    """The body is not a JSON object, nor TradingView-style ``key=value`` text."""

    code = "invalid_body"


class MissingIdentityFields(InvalidRequest):
    """The workflow's identity or source-time fields are missing or unreadable."""

    code = "invalid_identity"


class SourceTimeInFuture(InvalidRequest):
    """The source time is later than now plus the workflow's clock uncertainty."""

    code = "source_time_in_future"


class InvalidCloudEvent(InvalidRequest):
    """The event breaks the CloudEvents 1.0 spec; each problem names the attribute."""

    code = "invalid_cloudevent"


class CloudEventsNotEnabled(InvalidRequest):
    """A CloudEvent sent to a destination whose workflow does not take CloudEvents."""

    code = "cloudevents_not_enabled"


class CloudEventRequired(InvalidRequest):
    """A plain body sent to a destination that takes CloudEvents only."""

    code = "cloudevent_required"


class BrokerUnavailable(RequestRefused):
    """The answer when Kafka did not acknowledge in time (or could not be asked): 503, code
    ``kafka_unavailable``; the sender should retry. When the cause was the streams package's
    :class:`streams.errors.KafkaUnavailable` (the workflow table could not be read), that error
    is its ``__cause__``.

    The delivery may still be written after this answer: a librdkafka message cannot be
    recalled once queued. That is safe because the sender's retry is a new delivery of the
    same occurrence, which admission deduplicates.
    """

    status = 503
    code = "kafka_unavailable"

    def __init__(
        self,
        message: str,
        problems: Sequence[Problem] = (),
        *,
        headers: Mapping[str, str] | None = None,
        detail: str | None = None,
    ) -> None:
        super().__init__(message, problems, headers=headers, detail=detail)
        # TradingView ignores it, but other senders back off by it.
        self.headers.setdefault("Retry-After", "2")


class ClientDisconnected(RequestRefused):
    """The client went away before its request was complete: nobody is left to answer.

    Logged as status 499 (no answer was sent); nothing was produced.
    """

    status = 400
    code = "client_disconnected"


class TooManyConnections(RequestRefused):
    """A listener holds ``SLUICEGATE_INGEST_MAX_CONNECTIONS`` open connections: the next is
    answered this at once, without its request being read, and closed (``listener.py``)."""

    status = 503
    code = "too_many_connections"


class InternalError(RequestRefused):
    """A fault of the server itself; logged with its traceback, never caused by input."""

    status = 500
    code = "internal_error"


def shorten(text: str, limit: int = 300) -> str:
    """``text`` cut to ``limit`` characters (a sender's own value, quoted back, stays short)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
