"""Settings: local defaults, pass-through librdkafka settings, and errors that name the variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from streams.settings import SettingsError, load_settings


def test_defaults_are_the_local_stack() -> None:
    s = load_settings({})
    assert s.kafka == "127.0.0.1:9092"
    assert s.topic_named("runs") == "sluicegate.runs"
    assert (s.http_host, s.http_port) == ("127.0.0.1", 8080)
    assert s.pg_dsn.endswith("@127.0.0.1:5432/sluicegate")


def test_rdkafka_settings_pass_through(tmp_path: Path) -> None:
    props = tmp_path / "client.properties"
    props.write_text("# a comment\nsasl.mechanisms=PLAIN\nsecurity.protocol=PLAINTEXT\n")
    s = load_settings(
        {
            "SLUICEGATE_RDKAFKA_FILE": str(props),
            "SLUICEGATE_RDKAFKA_SECURITY_PROTOCOL": "SASL_SSL",
            "SLUICEGATE_RDKAFKA_SSL_CA_LOCATION": "/etc/ca.pem",
        }
    )
    conf = s.kafka_config(**{"group.id": "g"})
    assert conf["security.protocol"] == "SASL_SSL"  # the variable wins over the file
    assert conf["sasl.mechanisms"] == "PLAIN"
    assert conf["ssl.ca.location"] == "/etc/ca.pem"
    assert conf["group.id"] == "g"
    assert "partitioner" not in conf and s.producer_config()["partitioner"] == "murmur2_random"


@pytest.mark.parametrize(
    ("var", "value"),
    [
        ("SLUICEGATE_KAFKA", "localhost"),
        ("SLUICEGATE_KAFKA", "host:99999"),
        ("SLUICEGATE_HTTP", "8080"),
        ("SLUICEGATE_PG_DSN", "mysql:/nope"),
        ("SLUICEGATE_TOPIC_PREFIX", "bad prefix!"),
        ("SLUICEGATE_PARTITIONS", "0"),
        ("SLUICEGATE_RDKAFKA_FILE", "/does/not/exist"),
    ],
)
def test_a_wrong_value_fails_fast_and_names_the_setting(var: str, value: str) -> None:
    with pytest.raises(SettingsError, match=var):
        load_settings({var: value})
