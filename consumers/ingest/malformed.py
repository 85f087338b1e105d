"""The answer, and the log line, for a request aiohttp could not parse as HTTP.

aiohttp refuses such a request (a bad request line, header bytes, framing, a head over its
limits: 8,190 bytes a line, 128 headers) before any route or middleware runs. Left to
itself it answers with a text/plain body and logs the parser's exception with a traceback,
and both quote the sender's bytes: the line that failed, which may be a header carrying a
token or a signature. Here, on every listener of ``sluicegate ingest`` (the webhook and the
read API, :class:`~consumers.ingest.listener.CappedSite`):

- the answer is the contract's error body, 400 ``malformed_request`` or
  ``request_head_too_large``, naming the parser's reason and nothing the sender sent; the
  connection closes after it;
- the log gets one warning line with the remote address and the same reason, no traceback
  (:class:`QuietMalformedHttp`; tracebacks stay reserved for the server's own faults).

Nothing is read past the failure and nothing is produced to Kafka.
"""

from __future__ import annotations

import logging
import re

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError, LineTooLong
from aiohttp.web_protocol import RequestHandler

from consumers.ingest.answers import json_response
from consumers.ingest.errors import (
    InternalError,
    MalformedRequest,
    RequestHeadTooLarge,
    RequestRefused,
)

_QUOTE = re.compile(r":| b'| b\"| bytearray\(| '| \"|[^ -~]")
"""Where a parser message starts quoting the sender's bytes (or stops being printable)."""
_REASON_CHARS = 120


def parser_reason(exc: HttpProcessingError) -> str:
    """What the parser objected to, without any byte of the request: the message's first
    words, cut where it starts quoting (``Invalid character in Content-Length``)."""
    text = str(exc.message or type(exc).__name__).split("\n", 1)[0]
    cut = _QUOTE.search(text)
    reason = (text if cut is None else text[: cut.start()]).strip()[:_REASON_CHARS]
    return reason or type(exc).__name__


def refusal_for(exc: BaseException | None, status: int) -> RequestRefused:
    """The contract's answer for what aiohttp's ``handle_error`` was asked to answer."""
    if not isinstance(exc, HttpProcessingError) or status >= 500:
        return InternalError("internal error; it has been logged")
    reason = parser_reason(exc)
    if isinstance(exc, LineTooLong) or reason.startswith("Too many headers"):
        return RequestHeadTooLarge(
            "the request line or a header is longer than 8,190 bytes, or there are more than "
            f"128 headers ({reason}); nothing was read"
        )
    return MalformedRequest(f"the request is not valid HTTP/1.1 ({reason}); nothing was read")


class JsonErrorRequestHandler(RequestHandler):
    """aiohttp's connection handler, answering what it cannot parse in the contract's shape."""

    __slots__ = ()

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        # aiohttp's own handle_error logs the failure (QuietMalformedHttp rewrites the
        # record) and raises if an answer has started; its text/plain answer is replaced.
        super().handle_error(request, status, exc, message)
        refusal = refusal_for(exc, status)
        answer = json_response(refusal.body(), refusal.status, refusal.headers)
        answer.force_close()
        return answer


class QuietMalformedHttp(logging.Filter):
    """Rewrites aiohttp's record of an unparsable request into one warning line."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            remote = record.args[0] if isinstance(record.args, tuple) and record.args else "?"
            record.msg = "refused a request that is not valid HTTP from %s: %s"
            record.args = (remote, parser_reason(exc))
            record.exc_info, record.exc_text = None, None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True
