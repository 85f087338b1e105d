"""The latency benchmark's HTTP client: POSTs over kept-alive HTTP/1.1 connections, and little
else, so that the sender takes as few of the cores under test as it can.

The client runs on the same 2 cores as the ingest, the processor and the broker it measures;
aiohttp's client spent about 350 us of CPU per post there (0.35 cores at 1,000 posts/s), which
the servers then queued behind. This one writes each request as one prepared byte string and
reads the answer with :class:`ResponseParser` (status line, ``Content-Length`` body), about
half the CPU per post. It speaks only what the webhook answers: every response carries a
``Content-Length`` (aiohttp's ``json_response`` and its error pages do); one without it is a
:class:`ProtocolError`, never a guessed length.

One request at a time per connection (no pipelining); a request that finds no idle
connection opens a new one, up to ``limit`` open, then waits for one to come free. An answer
that does not come within ``timeout_s`` of its request being written is a ``TimeoutError``
(a stopped server must not hang the benchmark) and its connection is closed.
"""

from __future__ import annotations

import asyncio

_HEAD_END = b"\r\n\r\n"


class ProtocolError(Exception):
    """The server's bytes are not an HTTP/1.1 response this client can read."""


class ResponseParser:
    """Splits a connection's bytes into ``(status, body, keep_alive)`` responses."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[tuple[int, bytes, bool]]:
        """The responses ``data`` completes, in order; a partial one waits for more bytes."""
        self._buffer += data
        done: list[tuple[int, bytes, bool]] = []
        while True:
            head_end = self._buffer.find(_HEAD_END)
            if head_end < 0:
                return done
            status, length, keep_alive = _head(bytes(self._buffer[:head_end]))
            end = head_end + len(_HEAD_END) + length
            if len(self._buffer) < end:
                return done
            done.append((status, bytes(self._buffer[head_end + len(_HEAD_END) : end]), keep_alive))
            del self._buffer[:end]


def _head(head: bytes) -> tuple[int, int, bool]:
    status_line, *fields = head.split(b"\r\n")
    parts = status_line.split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise ProtocolError(f"not an HTTP/1.x status line: {status_line[:80]!r}")
    length: int | None = None
    keep_alive = parts[0] == b"HTTP/1.1"
    for field in fields:
        name, _, value = field.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            if not value.strip().isdigit():
                raise ProtocolError(f"bad Content-Length: {value[:40]!r}")
            length = int(value)
        elif name == b"connection":
            keep_alive = value.strip().lower() == b"keep-alive"
        elif name == b"transfer-encoding":
            raise ProtocolError("chunked answers are not read by this client")
    if length is None:
        raise ProtocolError("the answer has no Content-Length")
    return int(parts[1]), length, keep_alive


class _Connection(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = ResponseParser()
        self.waiter: asyncio.Future[tuple[int, bytes, bool]] | None = None
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        try:
            responses = self.parser.feed(data)
        except ProtocolError as e:
            self._fail(e)
            return
        for response in responses:
            waiter, self.waiter = self.waiter, None
            if waiter is None or waiter.done():
                self._fail(ProtocolError("an answer came that no request was waiting for"))
                return
            waiter.set_result(response)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(ConnectionError(f"the connection closed: {exc}"))

    def _fail(self, error: Exception) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)
        if self.transport is not None:
            self.transport.close()


class KeepAliveClient:
    """POSTs to one ``host:port`` over at most ``limit`` kept-alive connections."""

    def __init__(self, host: str, port: int, limit: int = 256, timeout_s: float = 60.0) -> None:
        self.host, self.port = host, port
        self.timeout_s = timeout_s
        self._idle: list[_Connection] = []
        self._slots = asyncio.Semaphore(limit)
        self._all: set[_Connection] = set()

    def request(self, path: str, body: bytes, content_type: str) -> bytes:
        """The bytes of one ``POST path`` with ``body``: prepare them before the timed part."""
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        return head.encode("ascii") + body

    async def send(self, request: bytes) -> tuple[int, bytes]:
        """Send a prepared request; its answer's status and body. Raises ``OSError``
        (``ConnectionError`` included) or :class:`ProtocolError` when no answer is read."""
        async with self._slots:
            connection = await self._connection()
            loop = asyncio.get_running_loop()
            waiter: asyncio.Future[tuple[int, bytes, bool]] = loop.create_future()
            connection.waiter = waiter
            assert connection.transport is not None
            # A timer, not asyncio.wait_for, which would make a task of every request.
            timer = loop.call_later(self.timeout_s, _expire, waiter)
            try:
                connection.transport.write(request)
                status, body, keep_alive = await waiter
            except BaseException:
                self._forget(connection)
                raise
            finally:
                timer.cancel()
            if keep_alive and not connection.closed:
                self._idle.append(connection)
            else:
                self._forget(connection)
            return status, body

    async def _connection(self) -> _Connection:
        """An idle connection the server has not closed meanwhile, else a new one."""
        while self._idle:
            connection = self._idle.pop()
            if not connection.closed:
                return connection
            self._forget(connection)
        return await self._open()

    async def _open(self) -> _Connection:
        loop = asyncio.get_running_loop()
        _, connection = await loop.create_connection(_Connection, self.host, self.port)
        self._all.add(connection)
        return connection

    def _forget(self, connection: _Connection) -> None:
        self._all.discard(connection)
        if connection.transport is not None:
            connection.transport.close()

    def close(self) -> None:
        """Close every connection."""
        for connection in list(self._all):
            self._forget(connection)
        self._idle.clear()


def _expire(waiter: asyncio.Future[tuple[int, bytes, bool]]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError("no answer in time"))
