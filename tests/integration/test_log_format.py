"""One log format for the whole tree (``SLUICEGATE_LOG_FORMAT``, ``serve --log-format``).

``sluicegate serve --log-format json``: every line of the whole tree is one JSON object.

Under ``serve`` every component writes to one stderr. Before, that stream mixed four shapes:
serve's own ``sluicegate serve: ...`` lines, the engines' and the projector's text lines,
ingest's and the venue's JSON lines and librdkafka's raw ``%7|1796...|CONNECT|...`` lines, so
a log pipeline could parse none of it as one format. The real tree (venue, processor, gate,
gateway, projector, worker, ingest) on the real broker, with librdkafka's ``debug=broker``
so that every client logs from its first moment, a SIGUSR1 report and a SIGKILLed child.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import orjson
import pytest

from sluicegate.supervisor import COMPONENTS, VENUE
from streams.kafka.topics import ensure_topics
from tests.support.kafka import unique_settings, wait_until
from tests.support.ports import free_port, free_ports
from tests.support.serve import http_get, pids_in

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
MEMBERS = {"ts", "level", "logger", "message", "component", "pid"}


def _answers(url: str) -> bool:
    answer = http_get(url)
    return answer is not None and answer[0] == 200


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text("utf-8", "replace").splitlines() if line.strip()]


def _parsed(line: str) -> dict[str, object] | None:
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) and value.keys() >= MEMBERS else None


def test_every_line_of_a_served_tree_is_a_json_line_naming_its_component(tmp_path: Path) -> None:
    settings = unique_settings()
    ensure_topics(settings)
    webhook, venue = free_port(), free_port()
    pid_file, log_path = tmp_path / "serve.pids", tmp_path / "serve.log"
    environ = dict(
        os.environ,
        SLUICEGATE_TOPIC_PREFIX=settings.topic_prefix,
        SLUICEGATE_STATE_DIR=str(settings.state_dir),
        SLUICEGATE_HTTP=f"127.0.0.1:{webhook}",
        SLUICEGATE_READ_HTTP=f"127.0.0.1:{free_port()}",
        SLUICEGATE_VENUE_URL=f"http://127.0.0.1:{venue}",
        SLUICEGATE_VENUE_STATE_DIR=str(tmp_path / "venue"),
        SLUICEGATE_RDKAFKA_DEBUG="broker",
    )
    environ.pop("SLUICEGATE_LOG_FORMAT", None)
    probes = free_ports(5)  # the processor's probes are the first
    command = [sys.executable, "-m", "sluicegate.cli", "serve", "--log-format", "json"]
    command += ["--health", f"127.0.0.1:{probes}"]
    everything = {VENUE, *COMPONENTS}
    with log_path.open("wb") as log:
        serve = subprocess.Popen(
            [*command, "--pid-file", str(pid_file)],
            cwd=ROOT,
            env=environ,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_until(lambda: set(pids_in(pid_file)) == {"serve", *everything}, timeout_s=60)
            wait_until(lambda: _answers(f"http://127.0.0.1:{webhook}/readyz"), timeout_s=90)
            first = pids_in(pid_file)
            # Ready: its SIGUSR1 handler is in place (before it, the signal would kill it).
            wait_until(lambda: _answers(f"http://127.0.0.1:{probes}/readyz"), timeout_s=90)
            os.kill(first["processor"], signal.SIGUSR1)
            wait_until(lambda: "counters:" in log_path.read_text("utf-8", "replace"), timeout_s=30)
            os.kill(first["gate"], signal.SIGKILL)
            wait_until(lambda: pids_in(pid_file).get("gate") not in (None, first["gate"]), 30)
        finally:
            serve.send_signal(signal.SIGTERM)
            code = serve.wait(90)
    assert code == 0
    lines = _lines(log_path)
    records = [_parsed(line) for line in lines]
    raw = [line for line, record in zip(lines, records, strict=True) if record is None]
    assert raw == [], f"{len(raw)} of {len(lines)} lines are not JSON log lines: {raw[:3]}"
    parsed = [r for r in records if r is not None]
    by_component = Counter(str(r["component"]) for r in parsed)
    assert {"serve", *everything} <= by_component.keys(), by_component
    kafka = {str(r["component"]) for r in parsed if r["logger"] == "sluicegate.kafka"}
    assert set(COMPONENTS) <= kafka, f"librdkafka's lines of {set(COMPONENTS) - kafka} missing"
    assert any(
        r["component"] == "processor" and str(r["message"]).startswith("counters:") for r in parsed
    )
    assert any(
        (r["component"], r["level"], r["message"])
        == ("serve", "warning", "gate exited with -9; restart in 1 s")
        for r in parsed
    )
    # A child's pid is the one serve started it with.
    assert {r["pid"] for r in parsed if r["component"] == "venue"} == {first[VENUE]}


def _run(component: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("SLUICEGATE_")}
    return subprocess.run(
        [sys.executable, "-m", "sluicegate.cli", component],
        cwd=ROOT,
        env={**environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("component", ["processor", "gate", "gateway", "projector", "worker"])
def test_a_setting_that_stops_a_component_is_its_last_json_line(component: str) -> None:
    done = _run(component, SLUICEGATE_LOG_FORMAT="json", SLUICEGATE_PARTITIONS="six")
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    record = _parsed(line)
    assert record is not None, line
    assert (record["level"], record["component"]) == ("error", component)
    assert "SLUICEGATE_PARTITIONS" in str(record["message"])


def test_a_log_format_that_does_not_exist_stops_serve_before_any_child_starts() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "sluicegate.cli", "serve"],
        cwd=ROOT,
        env={**os.environ, "SLUICEGATE_LOG_FORMAT": "yaml"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr == "sluicegate serve: SLUICEGATE_LOG_FORMAT='yaml': json or text\n"


def test_a_log_level_that_does_not_exist_stops_a_component_with_its_name() -> None:
    done = _run("processor", SLUICEGATE_LOG_LEVEL="verbose")
    assert done.returncode == 1
    assert done.stderr == (
        "sluicegate processor: SLUICEGATE_LOG_LEVEL='verbose': debug, info, warning, error\n"
    )
