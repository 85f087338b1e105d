"""Every line ``sluicegate ingest`` writes is a JSON object, librdkafka's own included (a
text line each with ``SLUICEGATE_LOG_FORMAT=text``).

librdkafka writes its log lines (connection failures, and everything ``debug`` asks for)
straight to stderr in its own format (``%3|1796634401.726|FAIL|rdkafka#producer-1| ...``),
so a log pipeline that parses ingest's JSON lines choked on them: a broker restart, a dead
bootstrap address or ``SLUICEGATE_RDKAFKA_DEBUG`` put them there. Now ingest's clients hand
them to its logger ``sluicegate.kafka``.

The real ``sluicegate ingest`` process against the real broker, with librdkafka's
``debug=broker`` so that it logs from its first moment.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.ingest import fresh_settings
from tests.support.kafka import wait_until
from tests.support.ports import free_port

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _healthy(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
            return s.recv(64).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


def _ingest_log(tmp_path: Path, **extra: str) -> list[str]:
    """The lines ``sluicegate ingest`` wrote from its start to its SIGTERM, once healthy."""
    _, env = fresh_settings()
    port = free_port()
    log_path = tmp_path / "ingest.log"
    environ = {**env, "SLUICEGATE_READ_HTTP": "off", "SLUICEGATE_RDKAFKA_DEBUG": "broker"}
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "sluicegate.cli", "ingest", "--http", f"127.0.0.1:{port}"],
            cwd=ROOT,
            env={**environ, **extra},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_until(lambda: _healthy(port), timeout_s=60, what="ingest serving")
        finally:
            process.send_signal(signal.SIGTERM)
            code = process.wait(30)
    assert code == 0
    return [line for line in log_path.read_text("utf-8", "replace").splitlines() if line]


def test_librdkafkas_lines_are_json_lines_of_ingests_log(tmp_path: Path) -> None:
    lines = _ingest_log(tmp_path)
    raw = [line for line in lines if not line.startswith("{")]
    assert raw == [], f"{len(raw)} of {len(lines)} lines are not JSON, first: {raw[:3]}"
    records = [json.loads(line) for line in lines]
    kafka = [r for r in records if r["logger"] == "sluicegate.kafka"]
    assert kafka, "librdkafka's lines were dropped instead of logged"
    # librdkafka names the client in each line: [rdkafka#producer-1], [sluicegate-ingest#consumer-2]
    client = re.compile(r"\[[^\]]+#(producer|consumer)-\d+\]")
    assert all(r["level"] == "debug" and client.search(r["message"]) for r in kafka), kafka[:3]
    assert records[-1]["message"] == "stopped"


def test_log_format_text_makes_every_line_of_ingest_a_text_line(tmp_path: Path) -> None:
    lines = _ingest_log(tmp_path, SLUICEGATE_LOG_FORMAT="text")
    shape = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z]+ [\w.]+: ")
    odd = [line for line in lines if not shape.match(line)]
    assert odd == [], f"{len(odd)} of {len(lines)} lines are not text log lines: {odd[:3]}"
    assert any(" DEBUG sluicegate.kafka: " in line for line in lines)
    # The access log's fields are on its line: what JSON would have shown, as key=value.
    access = [line for line in lines if " sluicegate.ingest.access: request " in line]
    assert any("status=200" in line for line in access), access[:3]
