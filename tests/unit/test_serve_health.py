"""``sluicegate serve --health HOST:PORT``: which child gets which probes' address."""

from __future__ import annotations

import socket

import pytest

from consumers.gateway.settings import GatewaySettings
from sluicegate import cli
from sluicegate.errors import SluicegateError
from sluicegate.supervisor import (
    PROBED,
    _command,
    components_for,
    health_addresses,
    kind_of,
    serve,
    taken,
)
from streams.settings import Settings


def test_each_child_with_probes_gets_the_next_port_in_start_order() -> None:
    names = components_for(GatewaySettings(), 2)
    found = health_addresses(names, ("127.0.0.1", 9470))
    assert list(found) == [n for n in names if kind_of(n) in PROBED]
    assert list(found) == [
        "processor",
        "gate",
        "gateway",
        "projector:0/2",
        "projector:1/2",
        "worker",
    ]
    assert [port for _, port in found.values()] == list(range(9470, 9476))
    assert {host for host, _ in found.values()} == {"127.0.0.1"}
    assert "ingest" not in found and "venue" not in found


def test_a_child_is_started_with_its_address() -> None:
    command = _command("projector:1/2", GatewaySettings(), ("0.0.0.0", 9474))
    assert command[-5:] == ["projector", "--share", "1/2", "--health", "0.0.0.0:9474"]
    assert "--health" not in _command("gate", GatewaySettings())


@pytest.mark.parametrize("port", [0, 65532])
def test_ports_that_cannot_all_be_given_are_refused(port: int) -> None:
    with pytest.raises(SluicegateError, match="consecutive ports"):
        health_addresses(components_for(GatewaySettings()), ("127.0.0.1", port))
    assert len(health_addresses(components_for(GatewaySettings()), ("h", 65531))) == 5


def test_the_option_and_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    args = cli.build_parser().parse_args(["serve", "--health", "9470"])
    assert args.health == ("127.0.0.1", 9470)
    monkeypatch.setenv("SLUICEGATE_SERVE_HEALTH", "0.0.0.0:9500")
    assert cli.build_parser().parse_args(["serve"]).health == ("0.0.0.0", 9500)
    monkeypatch.delenv("SLUICEGATE_SERVE_HEALTH")
    assert cli.build_parser().parse_args(["serve"]).health is None


def test_a_port_another_process_listens_on_is_named_and_serve_refuses_to_start() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert taken({"gate": ("127.0.0.1", port)}) == [
            f"gate 127.0.0.1:{port} (Address already in use)"
        ]
        # The gate's port is the first one plus one: gate follows the processor.
        with pytest.raises(SluicegateError, match=rf"gate 127\.0\.0\.1:{port} \(Address"):
            serve(Settings(), only=["gate"], health=("127.0.0.1", port - 1), liveness_s=None)
    assert taken({"gate": ("127.0.0.1", port)}) == []
