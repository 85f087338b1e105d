"""A request that is not valid HTTP gets the contract's JSON error, on both listeners.

aiohttp refuses such a request (a bad request line, header bytes, framing, a head over its
limits) before any handler or middleware runs, and used to answer with its own text/plain
body quoting the sender's bytes back (``Invalid character in Content-Length:\\n\\n
b'Content-Length: -1'``). A client that parses every error as
``{"error": {"code", "message", "problems"}}`` got text it could not read. Now the webhook
and the read API answer ``malformed_request`` or ``request_head_too_large`` in that shape,
quote nothing the sender sent, close the connection and keep serving.

The real ``sluicegate ingest`` process, both listeners on their own ports.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.component_process import ComponentProcess
from tests.support.ingest import fresh_settings
from tests.support.kafka import wait_until
from tests.support.ports import free_port
from tests.support.prometheus import Page

pytestmark = pytest.mark.integration

MARK = b"qz7Marker"
"""In every malformed request, so that an answer quoting the sender's bytes is caught."""

HEAD_TOO_LARGE = "request_head_too_large"
MALFORMED = "malformed_request"


def _request(target: bytes, *headers: bytes, body: bytes = b"", method: bytes = b"POST") -> bytes:
    lines = [method + b" " + target + b" HTTP/1.1", b"Host: a", *headers]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


CASES: dict[str, tuple[bytes, str]] = {
    "not http at all": (MARK + b"\r\n\r\n", MALFORMED),
    "negative content-length": (
        _request(b"/v1/hooks/x", b"Content-Length: -1", b"X-M: " + MARK),
        MALFORMED,
    ),
    "content-length that is not a number": (
        _request(b"/v1/hooks/x", b"Content-Length: " + MARK),
        MALFORMED,
    ),
    "two content-lengths": (
        _request(b"/v1/hooks/x", b"Content-Length: 1", b"Content-Length: 2", body=b"ab" + MARK),
        MALFORMED,
    ),
    "content-length and chunked": (
        _request(b"/v1/hooks/x", b"Content-Length: 3", b"Transfer-Encoding: chunked", body=MARK),
        MALFORMED,
    ),
    "a chunk size that is not hex": (
        _request(b"/v1/hooks/x", b"Transfer-Encoding: chunked", body=MARK + b"\r\nab\r\n0\r\n\r\n"),
        MALFORMED,
    ),
    "nul in a header value": (_request(b"/v1/stats", b"X-A: " + MARK + b"\x00b"), MALFORMED),
    "unknown http version": (b"GET /v1/" + MARK + b" HTTP/9.9\r\nHost: a\r\n\r\n", MALFORMED),
    "bytes that are not utf-8 in the path": (
        _request(b"/v1/runs/\xff\xfe" + MARK, method=b"GET"),
        MALFORMED,
    ),
    "a request line over 8 KiB": (
        _request(b"/v1/runs/" + MARK + b"a" * 9_000, method=b"GET"),
        HEAD_TOO_LARGE,
    ),
    "a header over 8 KiB": (_request(b"/v1/stats", b"X-Big: " + MARK * 1_000), HEAD_TOO_LARGE),
    "too many headers": (
        _request(b"/v1/stats", *(b"X-%d: " % i + MARK for i in range(200))),
        HEAD_TOO_LARGE,
    ),
}


@pytest.fixture(scope="module")
def ingest(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, int, Path]]:
    settings, _ = fresh_settings()
    webhook, read = free_port(), free_port()
    log_path = tmp_path_factory.mktemp("malformed") / "ingest.log"
    process = ComponentProcess(
        settings,
        "ingest",
        log_path=log_path,
        env={
            "SLUICEGATE_HTTP": f"127.0.0.1:{webhook}",
            "SLUICEGATE_READ_HTTP": f"127.0.0.1:{read}",
        },
    )
    process.start()
    try:
        wait_until(lambda: _status(webhook, b"/healthz") == 200, timeout_s=30, what="webhook")
        wait_until(lambda: _status(read, b"/nowhere") == 404, timeout_s=30, what="read API")
        yield webhook, read, log_path
    finally:
        process.stop()
        assert "Traceback" not in process.log_tail(50_000), process.log_tail()


def _send(port: int, data: bytes) -> bytes:
    """Everything the server answers ``data`` with, until it closes the connection (a
    server that kept it open would fail the test with a timeout after 5 s)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(data)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def _status(port: int, target: bytes) -> int | None:
    try:
        answer = _send(
            port, b"GET " + target + b" HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
        )
    except OSError:
        return None
    parts = answer.split(b"\r\n", 1)[0].split()
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None


@pytest.mark.parametrize("listener", ["webhook", "read API"])
@pytest.mark.parametrize("case", list(CASES))
def test_a_request_that_is_not_http_gets_the_contracts_json_error(
    ingest: tuple[int, int, Path], listener: str, case: str
) -> None:
    webhook, read, _ = ingest
    port = webhook if listener == "webhook" else read
    data, code = CASES[case]
    answer = _send(port, data)
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *header_lines = head.split(b"\r\n")
    headers = {
        k.strip().lower(): v.strip() for k, _, v in (h.partition(b":") for h in header_lines)
    }
    assert status_line.split()[1] == b"400", answer[:300]
    assert headers.get(b"content-type", b"").startswith(b"application/json"), head
    assert int(headers[b"content-length"]) == len(body), head
    error = json.loads(body)["error"]
    assert error["code"] == code, error
    assert isinstance(error["message"], str) and error["message"], error
    assert isinstance(error["problems"], list), error
    assert MARK.decode() not in body.decode(), "the answer quotes the sender's bytes back"
    assert _status(port, b"/healthz" if port == webhook else b"/nowhere") in (200, 404)


def test_each_refusal_is_one_warning_line_without_the_senders_bytes(
    ingest: tuple[int, int, Path],
) -> None:
    webhook, _, log_path = ingest
    before = log_path.stat().st_size
    _send(webhook, CASES["negative content-length"][0])
    _send(webhook, CASES["a header over 8 KiB"][0])

    def refusals() -> list[str]:
        with log_path.open("rb") as log:
            log.seek(before)
            text = log.read().decode("utf-8", "replace")
        return [line for line in text.splitlines() if "not valid HTTP" in line]

    wait_until(lambda: len(refusals()) == 2, timeout_s=10, what="two refusal lines")
    for line in refusals():
        record = json.loads(line)
        assert record["level"] == "warning", record
        assert MARK.decode() not in line, line


def test_the_webhooks_answers_are_counted_on_the_read_listener(
    ingest: tuple[int, int, Path],
) -> None:
    """``GET /metrics/ingest`` on the read API's listener: every answer the webhook gave, by
    status and code, with its latency; nothing of it on the webhook's own listener."""
    webhook, read, _ = ingest

    def counted() -> Page:
        answer = _send(
            read, b"GET /metrics/ingest HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
        )
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.split()[1] == b"200", head
        return Page(body.decode())

    def unauthorized(page: Page) -> float:
        found = page.all("sluicegate_ingest_requests_total", status="401", code="unauthorized")
        return sum(found.values())

    before = counted()
    for _ in range(3):
        closing = (b"Content-Type: application/json", b"Content-Length: 2", b"Connection: close")
        refused = _send(webhook, _request(b"/v1/hooks/nobody", *closing, body=b"{}"))
        assert refused.split()[1] == b"401", refused[:100]
    after = counted()
    assert unauthorized(after) - unauthorized(before) == 3
    total = "sluicegate_ingest_request_seconds_count"
    assert after.value(total) - before.value(total) >= 3  # the probes' /healthz count too
    assert _status(webhook, b"/metrics/ingest") == 404
