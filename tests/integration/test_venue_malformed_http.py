"""Bytes that are not HTTP, sent to the paper venue: aiohttp answers its own 400 before any
handler runs. That is the client's fault, so the venue logs one warning line for it, not a
traceback (tracebacks in its log stay reserved for its own faults), and goes on serving."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from tests.support.kafka import wait_until
from tests.support.venue import running_venue

pytestmark = pytest.mark.integration

NOT_HTTP = (
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 a TLS hello on a plain port\r\n\r\n",
    b"GET /api/v3/time HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n",
)


def test_requests_that_are_not_http_get_400_and_one_warning_line_each(tmp_path: Path) -> None:
    with running_venue(tmp_path) as venue:
        for raw in NOT_HTTP:
            with socket.create_connection(("127.0.0.1", venue.port), timeout=5) as conn:
                conn.sendall(raw)
                assert conn.recv(4096).split(b" ", 2)[1] == b"400"
        # aiohttp logs the bad header (the TLS hello it answers without a log line)
        wait_until(lambda: "Invalid header token" in venue.log(), timeout_s=10)
        status, _ = venue.admin("GET", "/paper/v1/orders")
        assert status == 200, "the venue goes on serving"
        log = venue.log()
    assert "Traceback" not in log, log
    refused = [line for line in log.splitlines() if "Invalid header token" in line]
    assert len(refused) == 1, refused
    line = json.loads(refused[0])  # one JSON log line, however its writer spaces it
    assert (line["level"], line["logger"]) == ("warning", "aiohttp.server"), line
    assert line["message"].startswith("refused a request that is not valid HTTP from 127.0.0.1")


def test_the_warning_line_quotes_none_of_the_senders_bytes(tmp_path: Path) -> None:
    # The parser's message quotes the line it failed on: here the API key header.
    key = "vmKeyMarker7f3a"
    raw = f"GET /api/v3/account HTTP/1.1\r\nHost: x\r\nX-MBX-APIKEY: {key}\x00\r\n\r\n"
    with running_venue(tmp_path) as venue:
        with socket.create_connection(("127.0.0.1", venue.port), timeout=5) as conn:
            conn.sendall(raw.encode())
            assert conn.recv(4096).split(b" ", 2)[1] == b"400"
        wait_until(lambda: "Invalid header value char" in venue.log(), timeout_s=10)
        log = venue.log()
    refused = [line for line in log.splitlines() if "not valid HTTP" in line]
    assert len(refused) == 1, refused
    assert key not in log, refused
