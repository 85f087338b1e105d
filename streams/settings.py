"""Settings from the environment, with local defaults.

Every component reads its settings through :func:`load_settings`. A wrong value fails fast
with :class:`SettingsError`, whose message names the environment variable to fix.

librdkafka settings pass through untouched: ``SLUICEGATE_RDKAFKA_SECURITY_PROTOCOL=SASL_SSL``
becomes ``security.protocol=SASL_SSL`` for every client (underscores become dots, lower-case),
and ``SLUICEGATE_RDKAFKA_FILE`` may name a ``key=value`` properties file read first.

Every ``SLUICEGATE_*`` variable but those naming a file or directory (:data:`PATH_VARIABLES`)
must be UTF-8 text: a value whose bytes are not is refused naming the variable and the byte,
never the value (it may be a secret), instead of failing later inside librdkafka or psycopg.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from schemas.topics import TopicSpec
from streams.errors import StreamsError
from streams.text import NotText, not_text, parse_duration_s, parse_whole, read_text_file

DEFAULT_KAFKA = "127.0.0.1:9092"
DEFAULT_PG_DSN = "postgresql://sluicegate:sluicegate@127.0.0.1:5432/sluicegate"
DEFAULT_TOPIC_PREFIX = "sluicegate."
DEFAULT_HTTP = "127.0.0.1:8080"
DEFAULT_PARTITIONS = 6

_RDKAFKA_PREFIX = "SLUICEGATE_RDKAFKA_"
_PREFIX_RE = re.compile(r"^[A-Za-z0-9._-]*$")
PATH_VARIABLES = frozenset(
    {
        "SLUICEGATE_STATE_DIR",
        "SLUICEGATE_RDKAFKA_FILE",
        "SLUICEGATE_VENUE_STATE_DIR",
        "SLUICEGATE_VENUE_CONFIG",
    }
)
"""The variables that name a file or directory: bytes that are not UTF-8 are a valid name."""


KafkaValue = str | int | float | bool
KafkaConfig = dict[str, KafkaValue]


class SettingsError(StreamsError):
    """A setting has a value Sluicegate cannot use; the message names the variable."""


@dataclass(frozen=True)
class Settings:
    """Resolved settings. ``kafka_extra`` is passed to every librdkafka client."""

    kafka: str = DEFAULT_KAFKA
    pg_dsn: str = DEFAULT_PG_DSN
    topic_prefix: str = DEFAULT_TOPIC_PREFIX
    http_host: str = "127.0.0.1"
    http_port: int = 8080
    partitions: int = DEFAULT_PARTITIONS
    state_dir: Path = Path("var/state")
    kafka_extra: Mapping[str, str] = field(default_factory=dict)
    read_timeout_s: float = 10.0
    """How long one read of the read model may take (``SLUICEGATE_READ_TIMEOUT``): the
    PostgreSQL ``statement_timeout`` of the read API's and the read commands' sessions."""
    kafka_logger: logging.Logger | None = None
    """Where librdkafka's log lines go (``None``: straight to stderr, in its own format).
    A client hands them over when it is polled, so one that is never polled (an admin
    client waiting on its futures) drops them: set by every long-running component, so that
    its log is one format throughout (``streams/logs.py``)."""

    def kafka_config(self, **overrides: object) -> KafkaConfig:
        """A librdkafka configuration: bootstrap, pass-through settings, then overrides."""
        conf: KafkaConfig = {"bootstrap.servers": self.kafka}
        conf.update(self.kafka_extra)
        if self.kafka_logger is not None:
            # The clients take a Logger here (confluent-kafka's documented "logger"), though
            # its type stubs list scalars only.
            conf["logger"] = cast(KafkaValue, self.kafka_logger)
        for name, value in overrides.items():
            if not isinstance(value, str | int | float | bool):
                raise TypeError(f"librdkafka setting {name} must be a scalar, not {value!r}")
            conf[name] = value
        return conf

    def producer_config(self, **overrides: object) -> KafkaConfig:
        """A producer configuration: Java-compatible murmur2 partitioning, so any client
        that keys by admission key lands on the same partition number."""
        return self.kafka_config(partitioner="murmur2_random", **overrides)

    def topic(self, spec: TopicSpec) -> str:
        """The full name of a catalogue topic (``schemas.topics``) under the configured prefix."""
        return f"{self.topic_prefix}{spec.name}"

    def topic_named(self, name: str) -> str:
        """The full name of a topic known by its short name only (a ``--topic`` argument, a
        stored projection offset), under the configured prefix."""
        return f"{self.topic_prefix}{name}"


def _require_host_port(var: str, value: str) -> tuple[str, int]:
    host, sep, port_text = value.rpartition(":")
    port = parse_whole(port_text, 65535)
    if not sep or not host or not port:
        raise SettingsError(f"{var}={value!r} is not HOST:PORT (for example {DEFAULT_HTTP})")
    return host, port


def _read_properties(var: str, path: str) -> dict[str, str]:
    try:
        text = read_text_file(Path(path))
    except OSError as e:
        raise SettingsError(f"{var}={path!r} cannot be read: {e.strerror}") from e
    except NotText as e:
        raise SettingsError(f"{var}: {e}") from None
    props: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise SettingsError(f"{var}: line {number} of {path} is not key=value")
        props[key.strip()] = value.strip()
    return props


def check_text_variables(env: Mapping[str, str]) -> None:
    """Raise :class:`SettingsError` for the first ``SLUICEGATE_*`` variable of ``env`` that is
    not UTF-8 text (those of :data:`PATH_VARIABLES` aside), naming it and the byte's position,
    never its value."""
    for var, value in env.items():
        if var.startswith("SLUICEGATE_") and var not in PATH_VARIABLES:
            problem = not_text(value)
            if problem is not None:
                raise SettingsError(f"{var}: {problem}; set it again as UTF-8 text")


def duration_setting(
    env: Mapping[str, str],
    var: str,
    default: str,
    low: float,
    high: float,
    *,
    error: type[Exception] = SettingsError,
) -> float:
    """Seconds of the duration ``var`` holds (``default`` if unset), from ``low`` to
    ``high``; else ``error`` naming the variable and the range."""
    raw = env.get(var, default)
    seconds = parse_duration_s(raw)
    if seconds is None or not low <= seconds <= high:
        raise error(
            f"{var}={raw!r} must be a duration from {low:g}s to {high:g}s (e.g. 250ms, 2s, 5m)"
        )
    return seconds


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """Read settings from ``env`` (default: the process environment); validate every value."""
    env = os.environ if env is None else env
    check_text_variables(env)
    kafka = env.get("SLUICEGATE_KAFKA", DEFAULT_KAFKA).strip()
    for server in kafka.split(","):
        _require_host_port("SLUICEGATE_KAFKA", server.strip())

    pg_dsn = env.get("SLUICEGATE_PG_DSN", DEFAULT_PG_DSN).strip()
    if not pg_dsn.startswith(("postgresql://", "postgres://")) and "=" not in pg_dsn:
        raise SettingsError(
            f"SLUICEGATE_PG_DSN={pg_dsn!r} is neither a postgresql:// URL nor a key=value DSN"
        )

    prefix = env.get("SLUICEGATE_TOPIC_PREFIX", DEFAULT_TOPIC_PREFIX)
    if not _PREFIX_RE.fullmatch(prefix) or len(prefix) > 100:
        raise SettingsError(
            f"SLUICEGATE_TOPIC_PREFIX={prefix!r} may hold only letters, digits, '.', '_', '-'"
        )

    http_host, http_port = _require_host_port(
        "SLUICEGATE_HTTP", env.get("SLUICEGATE_HTTP", DEFAULT_HTTP).strip()
    )

    raw_partitions = env.get("SLUICEGATE_PARTITIONS", str(DEFAULT_PARTITIONS)).strip()
    partitions = parse_whole(raw_partitions, 1024)
    if not partitions:
        raise SettingsError(
            f"SLUICEGATE_PARTITIONS={raw_partitions!r} must be a whole number from 1 to 1024"
        )

    read_timeout_s = duration_setting(env, "SLUICEGATE_READ_TIMEOUT", "10s", 0.1, 600)

    extra: dict[str, str] = {}
    if "SLUICEGATE_RDKAFKA_FILE" in env:
        extra.update(_read_properties("SLUICEGATE_RDKAFKA_FILE", env["SLUICEGATE_RDKAFKA_FILE"]))
    for var, value in env.items():
        if var.startswith(_RDKAFKA_PREFIX) and var != "SLUICEGATE_RDKAFKA_FILE":
            extra[var[len(_RDKAFKA_PREFIX) :].lower().replace("_", ".")] = value

    return Settings(
        kafka=kafka,
        pg_dsn=pg_dsn,
        topic_prefix=prefix,
        http_host=http_host,
        http_port=http_port,
        partitions=partitions,
        state_dir=Path(env.get("SLUICEGATE_STATE_DIR", "var/state")),
        kafka_extra=extra,
        read_timeout_s=read_timeout_s,
    )
