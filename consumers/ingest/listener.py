"""The front door's TCP listeners: how many connections each holds, and for how long.

aiohttp keeps a connection that has not sent a whole request head for its keep-alive
timeout, an hour by default, and accepts connections as long as the process has file
descriptors. One client holding 20,000 half-sent heads took all of them here: every other
request then timed out, and asyncio logged a traceback for each accept it could not make.
So:

- a connection must send a whole request head within ``SLUICEGATE_INGEST_IDLE_TIMEOUT`` of
  opening, or of its last answer (aiohttp's keep-alive timer, which bytes of a head do not
  restart); otherwise it is closed. A request whose head arrived is bounded by the body
  timeout and ``?wait=``, not by this;
- a listener holding ``SLUICEGATE_INGEST_MAX_CONNECTIONS`` connections answers the next
  one 503 ``too_many_connections`` (``Retry-After: 1``, ``Connection: close``) at once,
  without reading it, and closes it: a descriptor for a moment, never a handler;
- a request aiohttp cannot parse as HTTP is answered in the contract's shape, quoting none
  of its bytes (:mod:`consumers.ingest.malformed`);
- the process's descriptor limit is raised (up to its hard limit) to fit every listener's
  connections plus :data:`RESERVED_DESCRIPTORS`; where it cannot be, the connection limit
  is lowered to what fits, with a warning, so accepting never fails for want of one.
"""

from __future__ import annotations

import asyncio
import json
import logging
import resource
from collections import deque

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from consumers.ingest.errors import TooManyConnections
from consumers.ingest.malformed import JsonErrorRequestHandler

log = logging.getLogger("sluicegate.ingest")

RESERVED_DESCRIPTORS = 256
"""Descriptors kept for everything but the listeners' connections: Kafka's sockets, the
read API's pool, logs, the interpreter's own files."""

REFUSALS_LOGGED_EVERY_S = 10.0


def connection_budget(wanted: int, listeners: int, soft: int, hard: int) -> tuple[int, int]:
    """``(connections per listener, soft descriptor limit to set)`` for ``listeners``
    listeners of ``wanted`` connections each, under the limits ``soft`` and ``hard``
    (``resource.RLIM_INFINITY`` for none)."""
    needed = wanted * listeners + RESERVED_DESCRIPTORS
    if soft == resource.RLIM_INFINITY or needed <= soft:
        return wanted, soft
    raised = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    fits = max(1, (raised - RESERVED_DESCRIPTORS) // listeners)
    return min(wanted, fits), max(raised, soft)


def fit_descriptors(wanted: int, listeners: int) -> int:
    """Raise this process's descriptor limit for ``listeners`` listeners of ``wanted``
    connections; the connections per listener that fit (``wanted`` unless the hard limit
    is too low, which is logged)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit, new_soft = connection_budget(wanted, listeners, soft, hard)
    if new_soft != soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (new_soft, hard))
    if limit < wanted:
        log.warning(
            "SLUICEGATE_INGEST_MAX_CONNECTIONS=%d does not fit this process's descriptor "
            "limit (%d, hard %d) with %d listener(s): holding at most %d connections each; "
            "raise the limit (ulimit -n) to hold more",
            wanted,
            new_soft,
            hard,
            listeners,
            limit,
        )
    return limit


class CappedSite(web.TCPSite):
    """A TCP site that holds at most ``limit`` connections (see the module docstring)."""

    def __init__(
        self, runner: web.BaseRunner, host: str, port: int, *, backlog: int, limit: int
    ) -> None:
        super().__init__(runner, host, port, backlog=backlog, reuse_address=True)
        self.limit = limit
        self.refused = 0
        """Connections refused at the limit since the process started."""
        self._unlogged = 0
        self._logged_at = -REFUSALS_LOGGED_EVERY_S
        message = (
            f"this listener holds its limit of {limit} open connections "
            "(SLUICEGATE_INGEST_MAX_CONNECTIONS); try again in a moment"
        )
        body = json.dumps(TooManyConnections(message).body()).encode()
        self._answer = (
            f"HTTP/1.1 {TooManyConnections.status} Service Unavailable\r\n"
            "Content-Type: application/json; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\n"
            "Retry-After: 1\r\nConnection: close\r\n\r\n"
        ).encode() + body

    async def start(self) -> None:
        await web.BaseSite.start(self)  # registers the site with its runner, as TCPSite's
        server = self._runner.server
        assert server is not None
        loop = asyncio.get_running_loop()
        count = _OpenConnections(server)

        def connection() -> asyncio.BaseProtocol:
            now = loop.time()
            if count.open(now) < self.limit:
                count.accepting(now)
                handler = server()
                # aiohttp makes its handler itself (with the runner's settings); this
                # subclass adds no state, only the contract's answer to unparsable requests.
                handler.__class__ = JsonErrorRequestHandler
                return handler
            self._count_refusal(now)
            return _Refuse(self._answer)

        self._server = await loop.create_server(
            connection, self._host, self._port, backlog=self._backlog, reuse_address=True
        )
        sockets = self._server.sockets
        self._bound_port = sockets[0].getsockname()[1] if sockets else self._port

    def _count_refusal(self, now: float) -> None:
        self.refused += 1
        self._unlogged += 1
        if now - self._logged_at < REFUSALS_LOGGED_EVERY_S:
            return
        log.warning(
            "refused %d connection(s) at the limit of %d open connections on %s "
            "(SLUICEGATE_INGEST_MAX_CONNECTIONS); clients may be holding connections open",
            self._unlogged,
            self.limit,
            self.name,
        )
        self._unlogged, self._logged_at = 0, now


class _OpenConnections:
    """How many connections a listener holds, counted as they are accepted.

    The server's own count includes a connection only from its ``connection_made``, which
    asyncio runs a few callbacks after the protocol was made: a burst of accepts (2,048
    queued ones at once) would all see the count from before the burst. So a connection
    counts from its protocol's making (``accepting``) to its loss; one whose
    ``connection_made`` has not come within :data:`ACCEPT_GRACE_S` (its transport failed)
    stops counting."""

    ACCEPT_GRACE_S = 1.0

    def __init__(self, server: web.Server) -> None:
        self._accepting: deque[float] = deque()
        self._made = 0
        made, lost = server.connection_made, server.connection_lost

        def connection_made(handler: RequestHandler, transport: asyncio.Transport) -> None:
            if self._accepting:
                self._accepting.popleft()
            self._made += 1
            made(handler, transport)

        def connection_lost(handler: RequestHandler, exc: BaseException | None = None) -> None:
            self._made -= 1
            lost(handler, exc)

        # The handlers call these on the server they were made by (aiohttp's Server).
        server.connection_made = connection_made  # type: ignore[method-assign]
        server.connection_lost = connection_lost  # type: ignore[method-assign]

    def accepting(self, now: float) -> None:
        self._accepting.append(now)

    def open(self, now: float) -> int:
        while self._accepting and now - self._accepting[0] > self.ACCEPT_GRACE_S:
            self._accepting.popleft()
        return self._made + len(self._accepting)


class _Refuse(asyncio.Protocol):
    """Answers ``answer`` and closes, reading nothing."""

    def __init__(self, answer: bytes) -> None:
        self._answer = answer

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.WriteTransport)
        transport.write(self._answer)
        transport.close()
