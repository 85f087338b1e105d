"""The access log, the refusal bodies and the log filters of the webhook application.

Each request writes one JSON access-log line (logger ``sluicegate.ingest.access``) with the
method, the path without its query string, status, latency, subscription and delivery id,
and for refusals ``error`` (the code) and ``detail`` (the reason, e.g. which check a 401
failed). No secret, token, signature or body ever appears in a log line or a response.

Every refusal is ``{"error": {"code", "message", "problems"}}``. Any exception that is not a
deliberate refusal is a server fault: it is logged with its traceback and answered 500
``internal_error``. Requests that aiohttp cannot parse as HTTP at all never reach this
middleware: :mod:`consumers.ingest.malformed` answers and logs them.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from consumers.ingest.answers import json_response
from consumers.ingest.errors import (
    ClientDisconnected,
    InternalError,
    MethodNotAllowed,
    PayloadTooLarge,
    RequestRefused,
    RouteNotFound,
)
from consumers.ingest.hooks import DELIVERY_ID, SUBSCRIPTION
from consumers.ingest.malformed import QuietMalformedHttp
from consumers.ingest.request_metrics import RequestMetrics

log = logging.getLogger("sluicegate.ingest")
access_log = logging.getLogger("sluicegate.ingest.access")


def error_response(error: RequestRefused) -> web.Response:
    """The contract's error body for ``error``, with its status and headers."""
    return json_response(error.body(), error.status, error.headers)


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


def access_middleware(metrics: RequestMetrics | None = None) -> Middleware:
    """The access log (and, with ``metrics``, the answers counted) of every request."""

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
            seconds = time.perf_counter() - started
            fields: dict[str, object] = {
                "method": request.method,
                "path": request.path[:512],
                "status": status,
                "latency_ms": round(seconds * 1000, 3),
                "subscription": request.get(SUBSCRIPTION),
                "delivery_id": request.get(DELIVERY_ID),
            }
            if code is not None:
                fields["error"] = code
            if detail is not None:
                fields["detail"] = detail
            access_log.info("request", extra={"fields": fields})
            if metrics is not None:
                metrics.observe(status, code, seconds)

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


def install_log_filters() -> None:
    for name, kind in (("aiohttp.access", _RedactTokens), ("aiohttp.server", QuietMalformedHttp)):
        logger = logging.getLogger(name)
        if not any(isinstance(f, kind) for f in logger.filters):
            logger.addFilter(kind())
