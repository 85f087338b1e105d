"""docker-compose.yml cannot run here (no Docker engine); it must still agree with the
local defaults, so that the two ways of running the stack stay one stack."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from consumers.ingest.settings import DEFAULT_READ_HTTP
from sluicegate.health import parse_address
from sluicegate.supervisor import COMPONENTS
from streams.settings import DEFAULT_HTTP, DEFAULT_KAFKA, DEFAULT_PG_DSN, DEFAULT_TOPIC_PREFIX

ROOT = Path(__file__).resolve().parents[2]


def compose() -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert isinstance(data, dict)
    return data


def published(service: dict[str, Any]) -> dict[int, str]:
    """Host port -> host address it is published on ("" = every interface)."""
    out: dict[int, str] = {}
    for mapping in service.get("ports", []):
        parts = str(mapping).split(":")
        host_ip = parts[0] if len(parts) == 3 else ""
        out[int(parts[-2])] = host_ip
    return out


def host_ports(service: dict[str, Any]) -> set[int]:
    return set(published(service))


def test_infrastructure_ports_match_local_defaults() -> None:
    services = compose()["services"]
    assert int(DEFAULT_KAFKA.rsplit(":", 1)[1]) in host_ports(services["kafka"])
    assert 5432 in host_ports(services["postgres"])
    assert int(DEFAULT_HTTP.rsplit(":", 1)[1]) in host_ports(services["ingest"])
    assert (
        "PLAINTEXT://127.0.0.1:9092"
        in services["kafka"]["environment"]["KAFKA_ADVERTISED_LISTENERS"]
    )


def test_postgres_credentials_match_the_default_dsn() -> None:
    env = compose()["services"]["postgres"]["environment"]
    user, password, db = env["POSTGRES_USER"], env["POSTGRES_PASSWORD"], env["POSTGRES_DB"]
    assert f"postgresql://{user}:{password}@127.0.0.1:5432/{db}" == DEFAULT_PG_DSN


def test_every_component_is_a_service_with_the_shared_settings() -> None:
    services = compose()["services"]
    for name in COMPONENTS:
        if name == "worker":
            continue  # the demo branch worker stands in for the user's own workers
        service = services[name]
        assert service["command"][:2] == ["sluicegate", name]
        env = service["environment"]
        assert env["SLUICEGATE_TOPIC_PREFIX"] == DEFAULT_TOPIC_PREFIX
        assert env["SLUICEGATE_PG_DSN"].endswith("@postgres:5432/sluicegate")
        assert env["SLUICEGATE_KAFKA"] == "kafka:19092"
        assert {"kafka", "postgres"} <= set(service["depends_on"])


def test_transactions_work_on_the_single_node() -> None:
    env = compose()["services"]["kafka"]["environment"]
    assert env["KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR"] == 1
    assert env["KAFKA_TRANSACTION_STATE_LOG_MIN_ISR"] == 1
    assert env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"


def test_the_read_api_is_published_on_the_hosts_loopback_only() -> None:
    ingest = compose()["services"]["ingest"]
    read_port = int(DEFAULT_READ_HTTP.rsplit(":", 1)[1])
    assert published(ingest)[read_port] == "127.0.0.1"
    assert ingest["environment"]["SLUICEGATE_READ_HTTP"] == f"0.0.0.0:{read_port}"
    # The webhook is the one port senders from elsewhere must reach.
    assert published(ingest)[int(DEFAULT_HTTP.rsplit(":", 1)[1])] == ""
    # No other service publishes the read API.
    for name, service in compose()["services"].items():
        if name != "ingest":
            assert read_port not in host_ports(service), name


def test_the_engine_instances_are_probed_where_they_serve() -> None:
    services = compose()["services"]
    for name in ("processor", "gate", "gateway"):
        service = services[name]
        host, port = parse_address(service["environment"]["SLUICEGATE_HEALTH"])
        assert host == "127.0.0.1"  # the healthcheck runs inside the container
        probe = " ".join(service["healthcheck"]["test"])
        assert f"http://127.0.0.1:{port}/healthz" in probe
        assert service["environment"]["SLUICEGATE_KAFKA"] == "kafka:19092"


def test_every_component_that_serves_probes_has_a_health_check_on_its_address() -> None:
    services = compose()["services"]
    for name in ("processor", "gate", "gateway", "projector"):
        service = services[name]
        port = service["environment"]["SLUICEGATE_HEALTH"].rsplit(":", 1)[1]
        test = " ".join(service["healthcheck"]["test"])
        assert f"http://127.0.0.1:{port}/healthz" in test, name


def _probe(service: dict[str, Any]) -> str:
    return " ".join(service["healthcheck"]["test"])


def test_the_webhook_and_the_venue_are_probed_where_they_listen() -> None:
    services = compose()["services"]
    ingest = services["ingest"]
    webhook_port = parse_address(ingest["environment"]["SLUICEGATE_HTTP"])[1]
    # The webhook's /healthz answers while the process serves; Kafka's state is /readyz's.
    assert f"http://127.0.0.1:{webhook_port}/healthz" in _probe(ingest)
    venue = services["venue"]
    command = venue["command"]
    venue_port = parse_address(command[command.index("--http") + 1])[1]
    assert f"http://127.0.0.1:{venue_port}/paper/v1/health" in _probe(venue)
    # The gateway starts once the venue answers, not merely once its container started.
    assert services["gateway"]["depends_on"]["venue"]["condition"] == "service_healthy"


def test_every_long_running_service_has_a_health_check() -> None:
    for name, service in compose()["services"].items():
        assert "healthcheck" in service, name
