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
    assert s.read_timeout_s == 10.0


@pytest.mark.parametrize(("value", "seconds"), [("500ms", 0.5), ("2m", 120.0), (" 3 ", 3.0)])
def test_the_read_timeout_is_a_duration(value: str, seconds: float) -> None:
    assert load_settings({"SLUICEGATE_READ_TIMEOUT": value}).read_timeout_s == seconds


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
        # isdigit() says yes to these; int() then raised ValueError, a traceback
        ("SLUICEGATE_PARTITIONS", "\u00b2"),
        ("SLUICEGATE_PARTITIONS", "1" * 5000),
        ("SLUICEGATE_KAFKA", "localhost:\u00b2"),
        ("SLUICEGATE_HTTP", "127.0.0.1:" + "8" * 5000),
        ("SLUICEGATE_TOPIC_PREFIX", "sluicegate.\n"),
        ("SLUICEGATE_RDKAFKA_FILE", "/does/not/exist"),
        ("SLUICEGATE_READ_TIMEOUT", "0"),
        ("SLUICEGATE_READ_TIMEOUT", "11m"),
        ("SLUICEGATE_READ_TIMEOUT", "nan"),
        ("SLUICEGATE_READ_TIMEOUT", "\u0665s"),  # an Arabic-Indic five
        ("SLUICEGATE_READ_TIMEOUT", "10h"),
    ],
)
def test_a_wrong_value_fails_fast_and_names_the_setting(var: str, value: str) -> None:
    with pytest.raises(SettingsError, match=var):
        load_settings({var: value})


@pytest.mark.parametrize(
    "var",
    [
        "SLUICEGATE_KAFKA",
        "SLUICEGATE_PG_DSN",
        "SLUICEGATE_HTTP",
        "SLUICEGATE_RDKAFKA_SASL_PASSWORD",
        "SLUICEGATE_READ_TOKEN",
    ],
)
def test_a_value_whose_bytes_are_not_utf8_names_the_variable_not_the_value(var: str) -> None:
    # os.environ decodes such bytes into lone surrogates; librdkafka, psycopg and the HTTP
    # server would each fail on them later with a traceback.
    value = "secret\udcff:9092"
    with pytest.raises(SettingsError) as raised:
        load_settings({var: value})
    message = str(raised.value)
    assert message.startswith(f"{var}: byte 0xff at position 6 is not UTF-8;")
    assert "secret" not in message


def test_a_path_variable_may_hold_bytes_that_are_not_utf8() -> None:
    state_dir = "/var/lib/sluicegate-\udce9"
    assert str(load_settings({"SLUICEGATE_STATE_DIR": state_dir}).state_dir) == state_dir


def test_a_properties_file_that_is_not_utf8_names_the_variable(tmp_path: Path) -> None:
    props = tmp_path / "client.properties"
    props.write_bytes(b"sasl.password=caf\xe9\n")
    with pytest.raises(
        SettingsError,
        match=r"SLUICEGATE_RDKAFKA_FILE: .* is not UTF-8 text: byte 0xe9 at line 1, column 18",
    ):
        load_settings({"SLUICEGATE_RDKAFKA_FILE": str(props)})
