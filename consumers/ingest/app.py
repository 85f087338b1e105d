"""The webhook front door as an aiohttp application (``create_app``).

``POST /v1/hooks/{subscription}?env=paper|live[&wait=2s][&token=...]`` turns one request into
one ``AdmitDelivery`` on the ``deliveries`` topic, keyed by its admission key. In order:

1. the request's shape, judged the same way whatever the name (so that no answer tells
   what is configured): ``env`` (default ``paper``) and ``wait`` (422), a declared
   ``Content-Length`` over the limit (413), the media type and encoding (415);
2. the body is read, at most the limit (413) within the body timeout (408); a client that
   goes away meanwhile gets no answer (logged as 499);
3. the destination's workflow is looked up (503 if the workflow table cannot be read in
   time) and the sender authenticated: an unknown destination, an unset secret variable
   and bad credentials are all one 401 with one body, whose reason is only in the log;
4. the body is parsed and taken in (:func:`streams.core.intake.intake`, the step every front
   door takes: the top-level ``"token"`` field removed whatever the auth mode, near-miss
   field names mapped, the identity derived; 422, ``problems`` lists every field);
5. the delivery is produced and the broker's acknowledgement awaited (503 with
   ``Retry-After`` if it does not come within the budget, ``SLUICEGATE_INGEST_ACK_TIMEOUT``,
   which also covers the lookup);
6. 202 ``{"delivery_id", "admission_key"}``; with ``?wait=`` the admission outcome is awaited
   up to that long and the answer is 200 with ``outcome``/``run_id``/``duplicate``/``reason``,
   or 202 with ``"outcome": "pending"``.

Every refusal is ``{"error": {"code", "message", "problems"}}``; nothing is produced for a
refused request. Any exception that is not a deliberate refusal is a server fault: it is
logged with its traceback and answered 500 ``internal_error`` (input must never reach that
path; ``tests/integration/test_ingest_fuzz.py`` holds the app to it). Requests that aiohttp
cannot parse as HTTP at all get its plain-text 400, logged as one warning line without a
traceback.

This application serves only the hooks, ``/healthz`` and ``/readyz``: the read API has its
own listener (:mod:`consumers.ingest.server`).

Each request writes one JSON access-log line (logger ``sluicegate.ingest.access``) with the
method, the path without its query string, status, latency, subscription and delivery id,
and for refusals ``error`` (the code) and ``detail`` (the reason, e.g. which check a 401
failed). No secret, token, signature or body ever appears in a log line or a response.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Protocol

import orjson
from aiohttp import ClientPayloadError, web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.typedefs import Handler, Middleware

from consumers.ingest.auth import (
    SIGNATURE_HEADER,
    Credentials,
    ReplayGuard,
    authenticate,
    policy_for,
)
from consumers.ingest.errors import (
    BadRequest,
    ClientDisconnected,
    InternalError,
    InvalidBody,
    InvalidEnvironment,
    InvalidRequest,
    MethodNotAllowed,
    MissingIdentityFields,
    PayloadTooLarge,
    Problem,
    RequestRefused,
    RequestTimeout,
    RouteNotFound,
    SourceTimeInFuture,
    Unauthorized,
    UnsupportedMediaType,
)
from consumers.ingest.outcomes import PENDING, Outcome, OutcomeTracker
from consumers.ingest.parsing import body_kind, parse_body
from consumers.ingest.producer import AsyncDeliveryProducer
from consumers.ingest.settings import IngestSettings, parse_duration_s
from consumers.ingest.workflows import WorkflowDirectory
from schemas.commands import AdmitDelivery
from schemas.events import WorkflowRevised
from streams.adapters.deliveries import new_delivery_id
from streams.adapters.workflow_table import WorkflowTable
from streams.core.errors import FieldRole, Refusal
from streams.core.intake import TOKEN_FIELD, intake
from streams.core.reasons import (
    REJECT_INVALID_FIELD,
    REJECT_MISSING_FIELDS,
    REJECT_PAYLOAD_TOO_LARGE,
    REJECT_SOURCE_TIME_IN_FUTURE,
)
from streams.core.workflow import ENVIRONMENTS
from streams.settings import Settings

log = logging.getLogger("sluicegate.ingest")
access_log = logging.getLogger("sluicegate.ingest.access")

HOOK_PATH = "/v1/hooks/{subscription}"
DEFAULT_ENVIRONMENT = "paper"

_SUBSCRIPTION = web.RequestKey("sluicegate.subscription", str)
_DELIVERY_ID = web.RequestKey("sluicegate.delivery_id", str)


class Directory(Protocol):
    """Where workflows are looked up (``WorkflowDirectory`` in production)."""

    @property
    def loaded(self) -> bool: ...

    async def find(
        self, subscription: str, environment: str, timeout_s: float
    ) -> WorkflowRevised | None: ...


class Sink(Protocol):
    """Where deliveries go (``AsyncDeliveryProducer`` in production)."""

    async def send(self, delivery: AdmitDelivery, timeout_s: float) -> None: ...

    def reachable(self, timeout_s: float) -> bool: ...


class Outcomes(Protocol):
    """Where admission outcomes come from (``OutcomeTracker`` in production)."""

    def expect(self, delivery_id: str) -> asyncio.Future[Outcome]: ...

    def forget(self, delivery_id: str) -> None: ...

    async def wait(self, future: asyncio.Future[Outcome], timeout_s: float) -> Outcome | None: ...


def wall_clock_ms() -> int:
    """The default clock: UTC epoch milliseconds."""
    return time.time_ns() // 1_000_000


class Ingest:
    """The request handlers and the components they use; one per application."""

    def __init__(
        self,
        settings: Settings,
        limits: IngestSettings,
        clock: Callable[[], int],
        environ: Mapping[str, str],
        after_ack: Callable[[AdmitDelivery], None] | None,
    ) -> None:
        self.settings = settings
        self.limits = limits
        self.clock = clock
        self.environ = environ
        self.after_ack = after_ack
        self.guard = ReplayGuard(limits.replay_window_s)
        self.directory: Directory | None = None
        self.sink: Sink | None = None
        self.outcomes: Outcomes | None = None

    async def hook(self, request: web.Request) -> web.Response:
        """``POST /v1/hooks/{subscription}`` (see the module docstring for the steps)."""
        assert self.directory is not None and self.sink is not None
        started = time.monotonic()
        now_ms = self.clock()
        subscription = request.match_info["subscription"]
        request[_SUBSCRIPTION] = subscription
        environment = _environment(request)
        wait_s = _wait(request, self.limits.max_wait_s)
        limit = self.limits.max_body_bytes
        if request.content_length is not None and request.content_length > limit:
            raise PayloadTooLarge(f"the body is larger than {limit} bytes")
        kind = body_kind(request.content_type, request.charset)
        encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            raise UnsupportedMediaType("send the body uncompressed (no Content-Encoding)")
        read_started = time.monotonic()
        raw = await _read_body(request, limit, self.limits.body_timeout_s)
        # The sender's upload time is not ours to spend: only server-side waits count.
        started += time.monotonic() - read_started

        budget = self.limits.ack_timeout_s
        workflow = await self.directory.find(subscription, environment, budget)
        if workflow is None:
            raise Unauthorized(
                f"no workflow is applied for {subscription[:100]!r} in {environment} "
                "(`sluicegate workflows apply`)"
            )
        # Parse before authenticating (a token may be in the body) but disclose body
        # problems only to an authenticated sender.
        payload: dict[str, object] | None
        parse_error: InvalidBody | None = None
        try:
            payload = parse_body(raw, kind)
        except InvalidBody as e:
            payload, parse_error = None, e
        body_token = payload.get(TOKEN_FIELD) if payload is not None else None

        claim = authenticate(
            policy_for(workflow, self.environ),
            Credentials(
                signature=request.headers.get(SIGNATURE_HEADER),
                query_tokens=request.query.getall(TOKEN_FIELD, []),
                body_token=body_token,
            ),
            raw,
            now_s=now_ms / 1000,
            window_s=self.limits.replay_window_s,
            guard=self.guard,
            subscription=workflow.subscription,
            environment=workflow.environment,
        )
        produced = False
        try:
            if parse_error is not None:
                raise parse_error
            assert payload is not None
            taken = intake(
                payload,
                workflow,
                delivery_id=new_delivery_id(),
                received_at_ms=now_ms,
                channel="http",
                now_ms=now_ms,
            )
            if isinstance(taken, Refusal):
                raise _refused(taken)
            delivery = taken
            waiter = (
                self.outcomes.expect(delivery.delivery_id) if wait_s and self.outcomes else None
            )
            try:
                remaining = budget - (time.monotonic() - started)
                await self.sink.send(delivery, max(remaining, 0.05))
                produced = True
            finally:
                if waiter is not None and not produced and self.outcomes is not None:
                    self.outcomes.forget(delivery.delivery_id)
        finally:
            if claim is not None and not produced:
                self.guard.release(claim)

        request[_DELIVERY_ID] = delivery.delivery_id
        if self.after_ack is not None:
            self.after_ack(delivery)
        body: dict[str, object] = {
            "delivery_id": delivery.delivery_id,
            "admission_key": delivery.admission_key,
        }
        if waiter is None or self.outcomes is None:
            return _json(body, 202)
        try:
            outcome = await self.outcomes.wait(waiter, wait_s)
        finally:
            self.outcomes.forget(delivery.delivery_id)
        if outcome is None:
            body.update({"outcome": PENDING, "run_id": None, "duplicate": None, "reason": None})
            return _json(body, 202)
        body.update(outcome.as_json())
        return _json(body, 200)

    async def healthz(self, _request: web.Request) -> web.Response:
        """``GET /healthz``: the process is alive and serving."""
        return _json({"status": "ok"}, 200)

    async def readyz(self, _request: web.Request) -> web.Response:
        """``GET /readyz``: 200 when Kafka answers and the workflow table is loaded, else 503."""
        workflows = self.directory is not None and self.directory.loaded
        kafka = False
        if self.sink is not None:
            loop = asyncio.get_running_loop()
            kafka = await loop.run_in_executor(None, self.sink.reachable, 1.0)
        ready = workflows and kafka
        return _json(
            {"ready": ready, "checks": {"kafka": kafka, "workflows": workflows}},
            200 if ready else 503,
        )


def _environment(request: web.Request) -> str:
    values = request.query.getall("env", [])
    if len(values) > 1:
        raise InvalidEnvironment("give ?env= once", [Problem("env", "given more than once")])
    environment = values[0] if values else DEFAULT_ENVIRONMENT
    if environment not in ENVIRONMENTS:
        raise InvalidEnvironment(
            f"?env= must be one of {', '.join(ENVIRONMENTS)}",
            [Problem("env", f"must be one of {', '.join(ENVIRONMENTS)}")],
        )
    return environment


def _wait(request: web.Request, max_wait_s: float) -> float:
    values = request.query.getall("wait", [])
    if not values:
        return 0.0
    seconds = parse_duration_s(values[0]) if len(values) == 1 else None
    if seconds is None or seconds > max_wait_s:
        raise InvalidRequest(
            f"?wait= must be a duration of at most {max_wait_s:g}s, e.g. 2s or 500ms",
            [Problem("wait", f"a duration from 0s to {max_wait_s:g}s, given once")],
        )
    return seconds


async def _read_body(request: web.Request, limit: int, timeout_s: float) -> bytes:
    async def read() -> bytes:
        chunks: list[bytes] = []
        size = 0
        while True:
            chunk = await request.content.read(65536)
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > limit:
                raise PayloadTooLarge(f"the body is larger than {limit} bytes")
            chunks.append(chunk)

    try:
        return await asyncio.wait_for(read(), timeout_s)
    except TimeoutError:
        raise RequestTimeout(f"the body was not received within {timeout_s:g} s") from None
    except ConnectionError:
        # Closed, reset or half-closed mid-body: aiohttp wakes the reader with this.
        raise ClientDisconnected("the client went away before its body was complete") from None
    except (HttpProcessingError, ClientPayloadError, web.RequestPayloadError):
        # Broken chunking or content encoding: the sender's fault, say so without detail.
        raise BadRequest(
            "the request body could not be read (broken framing or encoding)"
        ) from None


def _refused(refusal: Refusal) -> RequestRefused:
    """The answer to a refused intake, chosen by its reason code."""
    problems = _problems(refusal)
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


def _shorten(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _problems(refusal: Refusal) -> list[Problem]:
    """One problem per field, rendered from the core's structure: what the field is for and
    what is wrong with it (the message may quote the sender's own value: kept short)."""
    problems = [
        Problem("body" if p.role is FieldRole.PAYLOAD else p.field, _shorten(p.explain()))
        for p in refusal.problems
    ]
    return problems or [Problem("body", _shorten(refusal.detail))]


def _json(
    body: Mapping[str, object], status: int, headers: Mapping[str, str] | None = None
) -> web.Response:
    return web.Response(
        body=orjson.dumps(body),
        status=status,
        content_type="application/json",
        headers=headers,
    )


def error_response(error: RequestRefused) -> web.Response:
    """The contract's error body for ``error``, with its status and headers."""
    return _json(error.body(), error.status, error.headers)


def _refusal_for(exc: web.HTTPException) -> RequestRefused:
    # aiohttp's own refusals (no route, wrong method, its parser limits) get our shape.
    if exc.status == 404:
        return RouteNotFound("no such resource: see the HTTP section of the README")
    if exc.status == 405:
        allowed = sorted(getattr(exc, "allowed_methods", ()) or ())
        refusal: RequestRefused = MethodNotAllowed(
            "method not allowed" + (f": use {', '.join(allowed)}" if allowed else "")
        )
        if allowed:
            refusal.headers["Allow"] = ", ".join(allowed)
        return refusal
    if exc.status == 413:
        return PayloadTooLarge("the body is too large")
    generic = RequestRefused(exc.reason or "request refused")
    generic.status = exc.status
    generic.code = "http_" + str(exc.status)
    return generic


def _access_middleware() -> Middleware:
    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        started = time.perf_counter()
        status = 500
        code: str | None = None
        detail: str | None = None
        try:
            try:
                response = await handler(request)
            except ClientDisconnected as e:
                # Nobody is left to read an answer; aiohttp drops it quietly.
                response, code, detail = error_response(e), e.code, e.detail or e.message
                status = 499
                return response
            except RequestRefused as e:
                response = error_response(e)
                code, detail = e.code, e.detail
            except web.HTTPException as e:
                if e.status < 400:
                    raise
                refusal = _refusal_for(e)
                response = error_response(refusal)
                code = refusal.code
            except asyncio.CancelledError:
                status = 499  # the client went away; nothing to answer
                raise
            except Exception:
                log.exception(
                    "unexpected error answering %s %s", request.method, request.path[:512]
                )
                response = error_response(InternalError("internal error; it has been logged"))
                code = InternalError.code
            status = response.status
            return response
        finally:
            fields: dict[str, object] = {
                "method": request.method,
                "path": request.path[:512],
                "status": status,
                "latency_ms": round((time.perf_counter() - started) * 1000, 3),
                "subscription": request.get(_SUBSCRIPTION),
                "delivery_id": request.get(_DELIVERY_ID),
            }
            if code is not None:
                fields["error"] = code
            if detail is not None:
                fields["detail"] = detail
            access_log.info("request", extra={"fields": fields})

    return middleware


class _RedactTokens(logging.Filter):
    """Blanks ``token=`` query values in aiohttp's own access log lines.

    ``sluicegate ingest`` switches that log off, but an embedding runner (tests, ``serve``)
    may leave it on, and its default format includes the query string.
    """

    _TOKEN = re.compile(r"([?&]token=)[^&\s\"]*", re.IGNORECASE)

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "token=" in message.lower():
            record.msg, record.args = self._TOKEN.sub(r"\1[redacted]", message), None
        return True


class _QuietMalformedHttp(logging.Filter):
    """Turns aiohttp's traceback for a request it could not parse into one warning line.

    aiohttp answers such a request (bad request line, header bytes, framing) with its own 400
    before any handler runs, and logs the parser's exception at ERROR with a traceback. That
    is the client's fault, not the server's: the operator gets one line saying what was
    refused, and tracebacks in the log stay reserved for real server faults.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            remote = record.args[0] if isinstance(record.args, tuple) and record.args else "?"
            record.msg = "refused a request that is not valid HTTP from %s: %s"
            record.args = (remote, _shorten(str(exc.message or exc), 300))
            record.exc_info, record.exc_text = None, None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def _install_log_filters() -> None:
    for name, kind in (("aiohttp.access", _RedactTokens), ("aiohttp.server", _QuietMalformedHttp)):
        logger = logging.getLogger(name)
        if not any(isinstance(f, kind) for f in logger.filters):
            logger.addFilter(kind())


def create_app(
    settings: Settings,
    *,
    limits: IngestSettings | None = None,
    clock: Callable[[], int] = wall_clock_ms,
    environ: Mapping[str, str] | None = None,
    directory: Directory | None = None,
    sink: Sink | None = None,
    outcomes: Outcomes | None = None,
    after_ack: Callable[[AdmitDelivery], None] | None = None,
) -> web.Application:
    """The ingest application.

    ``clock`` gives ``received_at_ms`` and the time signatures are judged against (epoch ms).
    ``environ`` is where secrets are read (default ``os.environ``, read per request).
    Components not passed in are created on start-up against ``settings``' Kafka and closed
    on clean-up (the producer is flushed first); passed-in ones belong to the caller.
    ``after_ack(delivery)`` runs after the broker acknowledged and before the answer — a
    fault-injection hook for tests; if it raises, the request is answered 500.
    The application serves the hooks, ``/healthz`` and ``/readyz``, and nothing else.
    """
    _install_log_filters()
    ingest = Ingest(
        settings,
        limits or IngestSettings(),
        clock,
        os.environ if environ is None else environ,
        after_ack,
    )
    ingest.directory, ingest.sink, ingest.outcomes = directory, sink, outcomes
    # Bodies are read as a stream with our own limit; aiohttp's limit is set above it so it
    # never answers first in its own format.
    app = web.Application(
        middlewares=[_access_middleware()],
        client_max_size=ingest.limits.max_body_bytes * 2,
        # Compressed bodies are refused (415) rather than inflated: no sender of webhooks
        # needs them, and inflating is where a small request becomes a large one.
        handler_args={"auto_decompress": False},
    )
    app.router.add_post(HOOK_PATH, ingest.hook)
    app.router.add_get("/healthz", ingest.healthz)
    app.router.add_get("/readyz", ingest.readyz)
    app.cleanup_ctx.append(_components(ingest))
    return app


def _components(ingest: Ingest) -> Callable[[web.Application], AsyncIterator[None]]:
    async def lifecycle(_app: web.Application) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        owned_directory: WorkflowDirectory | None = None
        owned_producer: AsyncDeliveryProducer | None = None
        owned_outcomes: OutcomeTracker | None = None
        if ingest.outcomes is None:
            owned_outcomes = OutcomeTracker(ingest.settings)
            owned_outcomes.start()
            ingest.outcomes = owned_outcomes
        if ingest.sink is None:
            owned_producer = AsyncDeliveryProducer(ingest.settings)
            owned_producer.start(loop)
            ingest.sink = owned_producer
        if ingest.directory is None:
            table = await loop.run_in_executor(None, WorkflowTable, ingest.settings)
            owned_directory = WorkflowDirectory(table)
            owned_directory.start()
            ingest.directory = owned_directory
        try:
            yield
        finally:
            if owned_producer is not None:
                await loop.run_in_executor(None, owned_producer.close)
            if owned_outcomes is not None:
                await loop.run_in_executor(None, owned_outcomes.close)
            if owned_directory is not None:
                await owned_directory.close()

    return lifecycle
