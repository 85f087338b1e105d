"""The venue HTTP client reads an answer in bounded time and memory, whatever the server sends.

A venue (or a proxy in front of it) that sends an endless body, or sends its body a byte at a
time, held the gateway's effect thread for as long as it went on: the read timeout bounded
each read, not the answer, and the body was read whole into memory. Such an answer is now a
``TransportFailure`` (the request may have been acted on: the order's outcome is unknown and
the gateway reconciles it), after at most :data:`~consumers.venue.http.MAX_ANSWER_BYTES` and
the read timeout. A real server on a local socket sends the bytes.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

import pytest

from consumers.venue.http import MAX_ANSWER_BYTES, HttpSession, TransportFailure

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"


@contextmanager
def serving(answer: Callable[[socket.socket], None]) -> Iterator[str]:
    """A server on a free local port that reads each request head and calls ``answer``
    (until the client goes away); yields its base URL."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)  # a blocked accept does not notice the listener closing
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(None)
                head = b""
                while b"\r\n\r\n" not in head:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    head += chunk
                with suppress(OSError):  # the client went away
                    answer(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(30)
        listener.close()


def endless(conn: socket.socket) -> None:
    conn.sendall(HEAD + b"Content-Length: 1000000000000\r\n\r\n")
    block = b"[" + b"0," * 32_767
    total = 0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and total < 4 * MAX_ANSWER_BYTES:
        conn.sendall(block)
        total += len(block)


def trickle(conn: socket.socket) -> None:
    body = b'{"serverTime": 1}' + b" " * 23
    conn.sendall(HEAD + f"Content-Length: {len(body)}\r\n\r\n".encode())
    for byte in body:  # 40 bytes, one every 0.25 s: 10 s in all, no read waits 1 s
        conn.sendall(bytes([byte]))
        time.sleep(0.25)


def test_an_endless_answer_is_cut_off_past_the_size_limit() -> None:
    with serving(endless) as url:
        session = HttpSession(url, read_timeout_s=30.0)
        with pytest.raises(TransportFailure) as failure:
            session.request("GET", "/api/v3/account")
    assert failure.value.kind == "connection"
    assert f"larger than {MAX_ANSWER_BYTES:,} bytes" in failure.value.detail


def test_an_answer_trickled_past_the_read_timeout_is_a_timeout() -> None:
    with serving(trickle) as url:
        session = HttpSession(url, read_timeout_s=1.0)
        with pytest.raises(TransportFailure) as failure:
            session.request("GET", "/api/v3/time")
    assert failure.value.kind == "timeout"


def test_an_answer_within_both_is_read_whole() -> None:
    body = b'{"serverTime": 1}'

    def prompt(conn: socket.socket) -> None:
        conn.sendall(HEAD + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)

    def chunked(conn: socket.socket) -> None:
        conn.sendall(HEAD + b"Transfer-Encoding: chunked\r\n\r\n")
        for part in (body[:5], body[5:]):
            conn.sendall(f"{len(part):x}\r\n".encode() + part + b"\r\n")
        conn.sendall(b"0\r\n\r\n")

    for answer in (prompt, chunked):
        with serving(answer) as url:
            got = HttpSession(url, read_timeout_s=5.0).request("GET", "/api/v3/time")
        assert (got.status, got.body) == (200, body)
