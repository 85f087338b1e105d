"""One warning line, not a traceback, for a request aiohttp could not parse as HTTP.

aiohttp answers such a request (a bad request line, header bytes, framing) with its own 400
before any handler runs, and logs the parser's exception at ERROR with a traceback, quoting
the line it failed on (which may carry an API key). That is the client's fault, not the
venue's: the log gets one line with the parser's reason and none of the sender's bytes, and
tracebacks in it stay reserved for the venue's own faults. The webhook does the same
(``consumers/ingest/malformed.py``); the venue imports nothing from the product, so it has its
own.
"""

from __future__ import annotations

import logging
import re

from aiohttp.http_exceptions import HttpProcessingError

_QUOTE = re.compile(r":| b'| b\"| bytearray\(| '| \"|[^ -~]")
"""Where a parser message starts quoting the sender's bytes (or stops being printable)."""
_REASON_CHARS = 120


class QuietMalformedHttp(logging.Filter):
    """Rewrites aiohttp's record of an unparsable request into one warning line."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            remote = record.args[0] if isinstance(record.args, tuple) and record.args else "?"
            record.msg = "refused a request that is not valid HTTP from %s: %s"
            record.args = (remote, _reason(exc))
            record.exc_info, record.exc_text = None, None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def _reason(exc: HttpProcessingError) -> str:
    # The parser quotes the line it failed on, which may be the API key's header: keep its
    # first words only ("Invalid header value char").
    text = str(exc.message or type(exc).__name__).split("\n", 1)[0]
    cut = _QUOTE.search(text)
    reason = (text if cut is None else text[: cut.start()]).strip()[:_REASON_CHARS]
    return reason or type(exc).__name__


def quiet_malformed_http() -> None:
    """Install :class:`QuietMalformedHttp` on aiohttp's server logger (once per process)."""
    logger = logging.getLogger("aiohttp.server")
    if not any(isinstance(f, QuietMalformedHttp) for f in logger.filters):
        logger.addFilter(QuietMalformedHttp())
