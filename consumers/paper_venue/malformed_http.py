"""One warning line, not a traceback, for a request aiohttp could not parse as HTTP.

aiohttp answers such a request (a bad request line, header bytes, framing) with its own 400
before any handler runs, and logs the parser's exception at ERROR with a traceback. That is
the client's fault, not the venue's: the log gets one line saying what was refused, and
tracebacks in it stay reserved for the venue's own faults. The webhook does the same
(``consumers/ingest/access.py``); the venue imports nothing from the product, so it has its
own.
"""

from __future__ import annotations

import logging

from aiohttp.http_exceptions import HttpProcessingError

_MESSAGE_LIMIT = 300
"""Characters of the parser's message kept (it quotes the sender's bytes)."""


class QuietMalformedHttp(logging.Filter):
    """Rewrites aiohttp's record of an unparsable request into one warning line."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            remote = record.args[0] if isinstance(record.args, tuple) and record.args else "?"
            message = str(exc.message or exc)
            if len(message) > _MESSAGE_LIMIT:
                message = message[: _MESSAGE_LIMIT - 1] + "…"
            record.msg = "refused a request that is not valid HTTP from %s: %s"
            record.args = (remote, message)
            record.exc_info, record.exc_text = None, None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def quiet_malformed_http() -> None:
    """Install :class:`QuietMalformedHttp` on aiohttp's server logger (once per process)."""
    logger = logging.getLogger("aiohttp.server")
    if not any(isinstance(f, QuietMalformedHttp) for f in logger.filters):
        logger.addFilter(QuietMalformedHttp())
