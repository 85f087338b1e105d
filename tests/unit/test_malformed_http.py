"""What the answer and the log line for an unparsable request say: the parser's reason only.

aiohttp's exceptions quote the line they failed on (``repr`` of bytes or text); whatever
that line holds, :func:`parser_reason` keeps the fixed words before the quote.
"""

from __future__ import annotations

import logging

from aiohttp.http_exceptions import (
    BadHttpMessage,
    BadHttpMethod,
    BadStatusLine,
    InvalidHeader,
    LineTooLong,
)
from hypothesis import given
from hypothesis import strategies as st

from consumers.ingest.errors import InternalError, MalformedRequest, RequestHeadTooLarge
from consumers.ingest.malformed import QuietMalformedHttp, parser_reason, refusal_for

lines = st.one_of(st.binary(max_size=200), st.text(max_size=200))


@given(lines)
def test_a_quoted_line_never_reaches_the_reason(line: bytes | str) -> None:
    text = line if isinstance(line, str) else line.decode("latin-1")
    cases = {
        LineTooLong(line, "8190"): "Got more than 8190 bytes when reading",
        InvalidHeader(line): "Invalid HTTP header",
        BadStatusLine(text): "Bad status line",
        BadHttpMethod(text): "Bad HTTP method in status line",
    }
    for exc, reason in cases.items():
        assert parser_reason(exc) == reason


def test_the_c_parsers_messages_keep_their_first_words() -> None:
    messages = {
        "Invalid character in Content-Length:\n\n  b'Content-Length: -1'\n  ^": (
            "Invalid character in Content-Length"
        ),
        "Transfer-Encoding can't be present with Content-Length:\n\n  b'x'": (
            "Transfer-Encoding can't be present with Content-Length"
        ),
        "Too many headers received": "Too many headers received",
        "": "BadHttpMessage",
        "\x00secret": "BadHttpMessage",
    }
    for message, reason in messages.items():
        assert parser_reason(BadHttpMessage(message)) == reason


def test_each_failure_gets_its_code() -> None:
    assert isinstance(refusal_for(LineTooLong(b"x" * 9000, "8190"), 400), RequestHeadTooLarge)
    assert isinstance(
        refusal_for(BadHttpMessage("Too many headers received"), 400), RequestHeadTooLarge
    )
    assert isinstance(
        refusal_for(BadHttpMessage("Invalid header value char:"), 400), MalformedRequest
    )
    assert isinstance(refusal_for(RuntimeError("boom"), 500), InternalError)
    assert isinstance(refusal_for(None, 504), InternalError)
    body = refusal_for(BadStatusLine("GET /secret HTTP/9"), 400).body()
    assert "secret" not in str(body)


def test_the_log_record_becomes_one_warning_line() -> None:
    exc = InvalidHeader(b"X-Api-Key: secret\x00")
    record = logging.LogRecord(
        "aiohttp.server",
        logging.ERROR,
        __file__,
        1,
        "Error handling request from %s",
        ("10.0.0.7",),
        (type(exc), exc, None),
    )
    assert QuietMalformedHttp().filter(record)
    assert record.levelno == logging.WARNING and record.exc_info is None
    assert record.getMessage() == (
        "refused a request that is not valid HTTP from 10.0.0.7: Invalid HTTP header"
    )
