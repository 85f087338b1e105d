"""Reading a hook request's query (``env``, ``wait``) and body, within the limits.

Each reader returns a value or raises the refusal for it; none reads more than the body limit
or waits longer than the body timeout.
"""

from __future__ import annotations

import asyncio

from aiohttp import ClientPayloadError, web
from aiohttp.http_exceptions import HttpProcessingError

from consumers.ingest.errors import (
    BadRequest,
    ClientDisconnected,
    InvalidEnvironment,
    InvalidRequest,
    PayloadTooLarge,
    Problem,
    RequestTimeout,
)
from streams.core.workflow import ENVIRONMENTS
from streams.text import parse_duration_s

DEFAULT_ENVIRONMENT = "paper"


def environment_of(request: web.Request) -> str:
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


def wait_of(request: web.Request, max_wait_s: float) -> float:
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


async def read_body(request: web.Request, limit: int, timeout_s: float) -> bytes:
    """The whole body, at most ``limit`` bytes (else :class:`PayloadTooLarge`), received
    within ``timeout_s`` (else :class:`RequestTimeout`)."""
    content = request.content
    if content.is_eof() and content.exception() is None:
        # The usual webhook: the body arrived with the headers, so there is nothing to wait
        # for (and no timeout task to start: 6% of ingest's main thread at 1,000 posts/s).
        raw = b"".join(iter(lambda: content.read_nowait(-1), b""))
        if len(raw) > limit:
            raise PayloadTooLarge(f"the body is larger than {limit} bytes")
        return raw

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
