"""An engine instance's probes over real HTTP on loopback: answers, and hostile clients.

Most tests drive ``InstanceStatus`` as the processor does; the last runs a real processor on
the broker whose loop wedges (the restore's start-overs are in
``test_engine_restore_retry.py``).
"""

from __future__ import annotations

import http.client
import json
import logging
import re
import socket
import threading
from collections.abc import Iterator, Sequence
from types import SimpleNamespace

import pytest

from sluicegate import cli
from sluicegate.commands import engine
from sluicegate.errors import SluicegateError
from sluicegate.health import MAX_CONNECTIONS, HealthServer, parse_address
from sluicegate.probes import EngineProbes
from streams.engine import processor as processor_module
from streams.engine.batch import ProcessorStats
from streams.engine.effects import EffectRunner
from streams.engine.processor import Processor
from streams.engine.status import InstanceStatus, Phase
from tests.support.clocks import ManualClock
from tests.support.engine_toy import (
    Running,
    ToyApp,
    admitted,
    create_toy_topics,
    produce_records,
    record,
)
from tests.support.kafka import unique_settings, wait_until
from tests.support.prometheus import Page


@pytest.fixture()
def clock() -> ManualClock:
    return ManualClock(500.0)


@pytest.fixture()
def status(clock: ManualClock) -> InstanceStatus:
    return InstanceStatus(stalled_after_s=30.0, clock=clock)


@pytest.fixture()
def server(status: InstanceStatus) -> Iterator[HealthServer]:
    served = HealthServer(EngineProbes(status), ("127.0.0.1", 0))
    try:
        yield served
    finally:
        served.close()


def get(
    server: HealthServer, path: str, method: str = "GET", body: bytes | None = None
) -> tuple[int, dict[str, object] | None]:
    conn = http.client.HTTPConnection(*server.address, timeout=5)
    try:
        conn.request(method, path, body=body)
        response = conn.getresponse()
        data = response.read()
        return response.status, json.loads(data) if data else None
    finally:
        conn.close()


def test_ready_once_running_and_why_not_before(
    server: HealthServer, status: InstanceStatus
) -> None:
    code, body = get(server, "/readyz")
    assert code == 503 and body is not None
    assert (body["phase"], body["ready"], body["healthy"]) == ("starting", False, True)
    assert get(server, "/healthz")[0] == 200
    status.enter(Phase.RESTORING)
    assert get(server, "/readyz")[1] == {**body, "phase": "restoring"}
    status.enter(Phase.RUNNING)
    status.holding((1, 4))
    code, body = get(server, "/readyz?verbose=1")
    assert code == 200 and body is not None
    assert (body["phase"], body["assigned"], body["reason"]) == ("running", [1, 4], None)
    status.enter(Phase.STARTING_OVER, "RestoreTimedOut: partition 4 held back")
    code, body = get(server, "/readyz")
    assert code == 503 and body is not None
    assert body["reason"] == "RestoreTimedOut: partition 4 held back"
    assert (body["starts_over"], body["failed_in_a_row"]) == (1, 1)
    assert get(server, "/healthz")[0] == 200


def test_a_running_loop_that_stalls_fails_liveness(
    server: HealthServer, status: InstanceStatus, clock: ManualClock
) -> None:
    status.enter(Phase.RESTORING)
    status.enter(Phase.RUNNING)
    status.came_round()
    clock.now += 30.5
    code, body = get(server, "/healthz")
    assert code == 503 and body is not None
    assert (body["healthy"], body["ready"], body["loop_seconds_ago"]) == (False, True, 30.5)
    status.came_round()
    assert get(server, "/healthz")[0] == 200
    status.enter(Phase.STOPPED, "FatalKafkaError: producer fenced")
    code, body = get(server, "/healthz")
    assert code == 503 and body is not None and body["reason"] == "FatalKafkaError: producer fenced"


def test_head_unknown_paths_and_other_methods(server: HealthServer) -> None:
    conn = http.client.HTTPConnection(*server.address, timeout=5)
    conn.request("HEAD", "/readyz")
    response = conn.getresponse()
    assert response.status == 503 and response.read() == b""
    assert int(response.headers["Content-Length"]) > 0
    conn.close()
    code, body = get(server, "/metrics")  # an instance without counters serves none
    assert code == 404 and body is not None and contract_error(body) == "not_found"
    code, body = get(server, "/readyz", "POST", b'{"phase": "running"}')
    assert code == 405 and body is not None and contract_error(body) == "method_not_allowed"
    assert get(server, "/healthz", "DELETE")[0] == 405


def contract_error(body: dict[str, object]) -> str:
    """The code of a body in the contract's error shape (asserting the shape)."""
    assert set(body) == {"error"}, body
    error = body["error"]
    assert isinstance(error, dict) and set(error) == {"code", "message", "problems"}, body
    assert isinstance(error["message"], str) and error["message"] and error["problems"] == []
    return str(error["code"])


def test_hostile_bytes_get_a_400_and_the_probes_keep_answering(server: HealthServer) -> None:
    for garbage in (
        b"\x00\xff\xfe GARBAGE\r\n\r\n",
        b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n",
    ):
        with socket.create_connection(server.address, timeout=5) as raw:
            raw.sendall(garbage)
            answer = raw.makefile("rb").read()
        head, _, body = answer.partition(b"\r\n\r\n")
        assert re.match(rb"HTTP/1\.[01] (400|414|431) ", head), answer[:80]
        assert contract_error(json.loads(body)) in ("bad_request", "request_uri_too_long")
        assert b"GARBAGE" not in body and b"aaaa" not in body, body[:200]
    # A client that connects and never sends holds one thread, not the server.
    with socket.create_connection(server.address, timeout=5):
        assert get(server, "/healthz")[0] == 200


def test_connections_beyond_the_limit_are_closed_and_the_probes_come_back(
    server: HealthServer,
) -> None:
    idle = [socket.create_connection(server.address, timeout=5) for _ in range(MAX_CONNECTIONS)]
    try:
        # Each idle connection holds a slot once the server accepted it.
        wait_until(lambda: refused(server), timeout_s=10, interval_s=0.05)
    finally:
        for conn in idle:
            conn.close()
    wait_until(lambda: get_or_none(server) == 200, timeout_s=10, interval_s=0.05)


def refused(server: HealthServer) -> bool:
    """Whether a probe's connection is closed without an answer."""
    with socket.create_connection(server.address, timeout=5) as raw:
        raw.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        try:
            return raw.recv(64) == b""
        except ConnectionResetError:
            return True


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("8081", ("127.0.0.1", 8081)),
        (":0", ("127.0.0.1", 0)),
        ("0.0.0.0:9090", ("0.0.0.0", 9090)),
        ("[::1]:9090", ("::1", 9090)),
    ],
)
def test_addresses(text: str, address: tuple[str, int]) -> None:
    assert parse_address(text) == address


@pytest.mark.parametrize("text", ["", "host", "host:port", "1:65536", "1:-1"])
def test_bad_addresses_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="health address"):
        parse_address(text)


def test_the_option_and_its_environment_default(monkeypatch: pytest.MonkeyPatch) -> None:
    for command in ("processor", "gate", "gateway"):
        assert cli.build_parser().parse_args([command]).health is None
        args = cli.build_parser().parse_args([command, "--health", "0.0.0.0:9464"])
        assert args.health == ("0.0.0.0", 9464)
        with pytest.raises(SystemExit):
            cli.build_parser().parse_args([command, "--health", "loopback"])
    monkeypatch.setenv("SLUICEGATE_HEALTH", "9465")
    assert cli.build_parser().parse_args(["gate"]).health == ("127.0.0.1", 9465)


def test_an_address_in_use_is_a_clear_error(server: HealthServer, status: InstanceStatus) -> None:
    with pytest.raises(SluicegateError, match=r"cannot serve the health probes on 127\.0\.0\.1:"):
        HealthServer(EngineProbes(status), server.address)


def test_the_command_loop_serves_the_probes_while_the_instance_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``--health`` as ``sluicegate processor``, ``gate`` and ``gateway`` use it: served from
    before the instance runs until it has stopped."""
    seen: list[int] = []
    WHO = {"app": "probed", "instance_id": "probed-1"}

    class Instance:
        def __init__(self) -> None:
            self.status = InstanceStatus(stalled_after_s=60.0)
            self.stats = ProcessorStats()
            self.instance_id = "probed-1"
            self.app = SimpleNamespace(name="probed")
            self.effects: EffectRunner | None = None

        def run(self) -> None:
            found = re.search(r"http://([\d.]+):(\d+)", caplog.text)
            assert found is not None, caplog.text
            address = (found.group(1), int(found.group(2)))
            self.status.enter(Phase.RESTORING)
            self.status.enter(Phase.RUNNING)
            conn = http.client.HTTPConnection(*address, timeout=5)
            conn.request("GET", "/readyz")
            answer = conn.getresponse()
            seen.append(answer.status)
            answer.read()
            self.stats.records = 5
            conn.request("GET", "/metrics")
            page = Page(conn.getresponse().read().decode())
            seen.append(int(page.value("sluicegate_engine_records_total", **WHO)))
            conn.close()
            self.status.enter(Phase.STOPPED)

        def stop(self) -> None:
            pass

    log = logging.getLogger("test.health")
    with caplog.at_level(logging.INFO, logger="test.health"):
        engine.run_until_signalled(Instance(), log, lambda _s: "done", ("127.0.0.1", 0))
    assert seen == [200, 5]


class WedgingApp(ToyApp):
    """Blocks the loop, between transactions, while :attr:`wedged` is set."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.wedged = threading.Event()
        self.released = threading.Event()

    def prepare(self, records: Sequence[object], now_ms: int) -> None:
        if self.wedged.is_set():
            self.released.wait(60)


@pytest.mark.integration
def test_a_real_instance_whose_loop_wedges_turns_unhealthy_and_recovers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = unique_settings(partitions=2)
    create_toy_topics(settings, 2)
    # Unhealthy after max(1 s, 3 transaction timeouts) = 3 s without the loop coming round.
    monkeypatch.setattr(processor_module, "STALLED_AFTER_S", 1.0)
    app = WedgingApp(settings)
    processor = Processor(settings, app, instance_id="a", transaction_timeout_ms=1000)
    served = HealthServer(EngineProbes(processor.status), ("127.0.0.1", 0))
    running = Running(processor)
    try:
        wait_until(lambda: get(served, "/readyz")[0] == 200, timeout_s=60)
        code, body = get(served, "/healthz")
        assert code == 200 and body is not None and body["assigned"] == [0, 1]
        app.wedged.set()
        wait_until(lambda: get(served, "/healthz")[0] == 503, timeout_s=30)
        code, body = get(served, "/healthz")
        assert code == 503 and body is not None
        assert body["phase"] == "running" and body["stalled_after_seconds"] == 3.0
        assert isinstance(body["loop_seconds_ago"], float) and body["loop_seconds_ago"] > 3.0
        app.released.set()
        app.wedged.clear()
        wait_until(lambda: get(served, "/healthz")[0] == 200, timeout_s=30)
        keys = [f"k{n}" for n in range(6)]
        produce_records(settings, [record(k, f"id-{k}") for k in keys])
        wait_until(lambda: processor.stats.records >= len(keys), timeout_s=60)
        assert admitted(settings) == {f"id-{k}": 1 for k in keys}
    finally:
        running.stop()
        served.close()
    assert running.error is None
    assert get_or_none(served) is None  # closed: nothing listens any more


def get_or_none(server: HealthServer) -> int | None:
    try:
        return get(server, "/healthz")[0]
    except OSError:
        return None
