"""Connections that send nothing useful cannot take the webhook down.

A client that opens connections and sends a request head a byte at a time, or never
finishes it, used to hold each connection for an hour (aiohttp's default keep-alive
timeout): 20,000 such connections from one machine took every file descriptor of
``sluicegate ingest`` here; ``/healthz`` then timed out and asyncio logged a traceback for
every refused accept. Now a connection without a complete request head within
``SLUICEGATE_INGEST_IDLE_TIMEOUT`` of its opening (or of its last answer) is closed, and at
``SLUICEGATE_INGEST_MAX_CONNECTIONS`` open connections the next one is answered 503
``too_many_connections`` at once and closed.

The real ``sluicegate ingest`` process, on its own port.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.component_process import ComponentProcess
from tests.support.ingest import fresh_settings
from tests.support.kafka import wait_until
from tests.support.ports import free_port

pytestmark = pytest.mark.integration

PARTIAL_HEAD = b"POST /hooks/btc-breakout/paper HTTP/1.1\r\nHost: a\r\n"


@pytest.fixture()
def ingest(tmp_path: Path) -> Iterator[int]:
    settings, _ = fresh_settings()
    port = free_port()
    process = ComponentProcess(
        settings,
        "ingest",
        log_path=tmp_path / "ingest.log",
        env={
            "SLUICEGATE_HTTP": f"127.0.0.1:{port}",
            "SLUICEGATE_READ_HTTP": "off",
            "SLUICEGATE_INGEST_IDLE_TIMEOUT": "1s",
            "SLUICEGATE_INGEST_MAX_CONNECTIONS": "20",
        },
    )
    process.start()
    try:
        wait_until(lambda: health(port) == 200, timeout_s=30, what="ingest listening")
        yield port
    finally:
        process.stop()
        assert "Traceback" not in process.log_tail(20_000), process.log_tail()


def health(port: int) -> int | None:
    """The status of ``GET /healthz`` on a new connection, or None if it got none."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
            head = read_all(s).split(b"\r\n", 1)[0]
    except OSError:
        return None
    parts = head.split()
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None


def read_all(s: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (or 5 s pass)."""
    s.settimeout(5)
    chunks = []
    while chunk := s.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def test_a_connection_that_never_completes_its_request_head_is_closed(ingest: int) -> None:
    held = [socket.create_connection(("127.0.0.1", ingest), timeout=5) for _ in range(10)]
    started = time.monotonic()
    for s in held:
        s.sendall(PARTIAL_HEAD)
    # A byte now and then does not keep a head alive: the deadline is for the whole head.
    held[0].sendall(b"X-a: b\r\n")
    closed = [read_all(s) for s in held]  # EOF once the server closes each
    waited = time.monotonic() - started
    assert closed == [b""] * 10
    assert waited < 4.5, f"closed after {waited:.1f} s, the idle timeout is 1 s"
    assert health(ingest) == 200


def test_past_the_connection_limit_the_next_connection_is_answered_503_and_closed(
    ingest: int,
) -> None:
    held = []
    try:
        for _ in range(20):
            s = socket.create_connection(("127.0.0.1", ingest), timeout=5)
            s.sendall(PARTIAL_HEAD)
            held.append(s)
        with socket.create_connection(("127.0.0.1", ingest), timeout=5) as extra:
            answer = read_all(extra)  # answered without a byte of request
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 503 "), answer
        assert b"\r\nConnection: close" in head and b"\r\nRetry-After: 1" in head, head
        error = json.loads(body)["error"]
        assert error["code"] == "too_many_connections"
        assert "SLUICEGATE_INGEST_MAX_CONNECTIONS" in error["message"]
    finally:
        for s in held:
            s.close()
    wait_until(lambda: health(ingest) == 200, timeout_s=10, what="room again")
