"""A small synchronous HTTP/1.1 client for venue adapters: one keep-alive connection.

Failures are classified by what they prove about the request, because that decides whether an
order may exist:

- ``not_sent`` — the connection could not be made (refused, DNS, connect timeout, TLS): no
  byte of the request left this process.
- ``timeout`` — the request was sent (or may have been) and no answer came within the read
  timeout.
- ``connection`` — the connection broke after the request may have been sent.

A kept-alive connection the server has closed while idle is detected before it is reused (the
socket reads as ready with nothing to say), so a stale connection does not turn an order into an
unknown. Requests marked ``idempotent`` (reads) are retried once on a fresh connection when a
reused connection breaks (not when it times out); others never are. Not thread-safe.
"""

from __future__ import annotations

import http.client
import select
import socket
import ssl
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

USER_AGENT = "sluicegate-venue-adapter/0.2"
MAX_ANSWER_BYTES = 16 << 20
"""The largest answer body read (16 MiB; Binance's largest here, 1,000 trades, is about 300 KB).
A larger one is a ``connection`` failure: the request may have been acted on."""
_READ_BYTES = 64 * 1024


class TransportFailure(Exception):
    """No HTTP answer; ``kind`` is ``not_sent``, ``timeout`` or ``connection``."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail


@dataclass(frozen=True)
class HttpAnswer:
    status: int
    body: bytes
    retry_after: str | None = None


class HttpSession:
    """Requests to one base URL (``http://host:port`` or ``https://host``) over one connection."""

    def __init__(
        self, base_url: str, *, connect_timeout_s: float = 3.0, read_timeout_s: float = 10.0
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"base URL {base_url!r} is not http(s)://host[:port]")
        self.base_url = base_url.rstrip("/")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._https else 80)
        self._prefix = parts.path.rstrip("/")
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = read_timeout_s
        self._conn: http.client.HTTPConnection | None = None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def request(
        self,
        method: str,
        target: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        *,
        idempotent: bool = False,
    ) -> HttpAnswer:
        """Send one request (``target`` is the path and query) and read the whole answer."""
        reused = self._usable()
        try:
            return self._exchange(method, target, body, headers or {})
        except TransportFailure as failure:
            if reused and idempotent and failure.kind == "connection":
                return self._exchange(method, target, body, headers or {})
            raise

    def _answer_body(
        self,
        conn: http.client.HTTPConnection,
        response: http.client.HTTPResponse,
        deadline: float,
    ) -> bytes:
        """The answer's body, read by the ``deadline`` (``TimeoutError`` otherwise) and up to
        :data:`MAX_ANSWER_BYTES` (``http.client.HTTPException`` past it).

        ``response.read()`` read whatever the server sent, for as long as it sent it: each
        read was bounded by the read timeout, not the answer, and an answer declaring a
        ``Content-Length`` of a terabyte raised ``MemoryError``. Each read now waits at most
        what is left until the deadline."""
        chunks: list[bytes] = []
        size = 0
        while response.length != 0:  # None: until the server closes
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"the answer took longer than {self.read_timeout_s} s")
            if conn.sock is not None:
                conn.sock.settimeout(left)
            chunk = response.read1(_READ_BYTES)
            if not chunk:
                break
            size += len(chunk)
            if size > MAX_ANSWER_BYTES:
                raise http.client.HTTPException(f"an answer larger than {MAX_ANSWER_BYTES:,} bytes")
            chunks.append(chunk)
        if response.length:  # the server closed before the declared length
            raise http.client.IncompleteRead(b"".join(chunks), response.length)
        response.close()  # done with: the connection may carry the next request
        if conn.sock is not None:
            conn.sock.settimeout(self.read_timeout_s)
        return b"".join(chunks)

    def _usable(self) -> bool:
        """Whether an open connection will be reused (closing it first if the peer left)."""
        conn = self._conn
        if conn is None or conn.sock is None:
            self._conn = None
            return False
        readable, _, _ = select.select([conn.sock], [], [], 0)
        if readable:  # an idle connection with something to read has been closed by the peer
            self.close()
            return False
        return True

    def _connect(self) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection
        if self._https:
            conn = http.client.HTTPSConnection(
                self._host,
                self._port,
                timeout=self.connect_timeout_s,
                context=ssl.create_default_context(),
            )
        else:
            conn = http.client.HTTPConnection(
                self._host, self._port, timeout=self.connect_timeout_s
            )
        try:
            conn.connect()
        except (OSError, ssl.SSLError) as e:
            conn.close()
            raise TransportFailure("not_sent", f"cannot connect to {self.base_url}: {e}") from None
        assert conn.sock is not None
        conn.sock.settimeout(self.read_timeout_s)
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._conn = conn
        return conn

    def _exchange(
        self, method: str, target: str, body: bytes | None, headers: dict[str, str]
    ) -> HttpAnswer:
        conn = self._conn if self._conn is not None else self._connect()
        all_headers = {"User-Agent": USER_AGENT, "Accept": "application/json", **headers}
        deadline = time.monotonic() + self.read_timeout_s
        try:
            conn.request(method, self._prefix + target, body=body, headers=all_headers)
            response = conn.getresponse()
            data = self._answer_body(conn, response, deadline)
        except TimeoutError as e:
            self.close()
            raise TransportFailure(
                "timeout", f"no answer within {self.read_timeout_s} s: {e}"
            ) from None
        except (OSError, http.client.HTTPException) as e:
            self.close()
            raise TransportFailure("connection", f"{type(e).__name__}: {e}") from None
        if response.will_close:
            self.close()
        return HttpAnswer(response.status, data, response.getheader("Retry-After"))
