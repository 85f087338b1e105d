"""``sluicegate replay``: topics decoded for analysts, straight from Kafka.

Reads the chosen topics (default: every source topic) with ``read_committed`` from their
beginning (or from ``--since``, located with the broker's time index) to their end as it was
when the replay started, and stops. Each record passes through :class:`ReplayFilter`; the
survivors are written as JSON lines or CSV. Nothing is committed to Kafka and the projection
is not involved. Offsets retention removes before the replay reads them are skipped and
reported (:class:`Gap`), never skipped in silence.
"""

from __future__ import annotations

import base64
import csv
import dataclasses
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

import orjson
from confluent_kafka import (
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

from schemas.codec import decode, to_json_dict
from schemas.errors import SchemaError
from schemas.records import RECORD_CLASSES
from schemas.topics import TOPICS, Role, projected
from streams.core.durations import format_time
from streams.core.durations import parse_time as core_parse_time
from streams.core.errors import InvalidValue
from streams.errors import FatalKafkaError, InvalidFilter, KafkaUnavailable
from streams.kafka.clients import admin_client, read_committed_consumer
from streams.kafka.headers import as_text
from streams.settings import Settings

_LATEST = OffsetSpec.latest()  # type: ignore[no-untyped-call]
_EARLIEST = OffsetSpec.earliest()  # type: ignore[no-untyped-call]


def parse_time(text: str) -> int:
    """Epoch milliseconds from RFC 3339 with an offset (``2026-11-30T12:00:00Z``) or epoch ms.

    The same rules as every other time Sluicegate reads (``streams.core.durations``); raises
    :class:`InvalidFilter` for anything else, including times without a UTC offset.
    """
    try:
        return core_parse_time(text)
    except InvalidValue as e:
        raise InvalidFilter(f"--since/--until: {e}") from e


@dataclass(frozen=True)
class ReplayFilter:
    """Which records to keep; every condition given must hold.

    - ``since_ms`` <= Kafka record timestamp < ``until_ms``;
    - ``subscription``: the record's ``subscription`` field, else the first ``/``-separated
      part of its admission key (or of the message key);
    - ``run``: the record's ``run_id``, its ``rerun_of``, or one of its ``run_ids``;
    - ``scope``: the record's ``scope_key``.

    Values are compared as plain strings: no pattern syntax, nothing is interpreted.
    """

    since_ms: int | None = None
    until_ms: int | None = None
    subscription: str | None = None
    run: str | None = None
    scope: str | None = None

    def keeps_time(self, timestamp_ms: int | None) -> bool:
        if self.since_ms is not None and (timestamp_ms is None or timestamp_ms < self.since_ms):
            return False
        return self.until_ms is None or (timestamp_ms is not None and timestamp_ms < self.until_ms)

    def keeps(self, record: object | None, key: str | None, timestamp_ms: int | None) -> bool:
        if not self.keeps_time(timestamp_ms):
            return False
        if self.subscription is not None and _subscription_of(record, key) != self.subscription:
            return False
        if self.run is not None and self.run not in _runs_of(record):
            return False
        return self.scope is None or getattr(record, "scope_key", None) == self.scope


def _subscription_of(record: object | None, key: str | None) -> str | None:
    value = getattr(record, "subscription", None)
    if isinstance(value, str):
        return value
    for candidate in (getattr(record, "admission_key", None), key):
        if isinstance(candidate, str) and candidate:
            return candidate.split("/", 1)[0]
    return None


def _runs_of(record: object | None) -> set[str]:
    runs: set[str] = set()
    for name in ("run_id", "rerun_of"):
        value = getattr(record, name, None)
        if isinstance(value, str):
            runs.add(value)
    many = getattr(record, "run_ids", None)
    if isinstance(many, tuple):
        runs.update(v for v in many if isinstance(v, str))
    return runs


@dataclass(frozen=True)
class Replayed:
    """One message as replayed: where it was, and its record or why it did not decode."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int | None
    key: str | None
    record: object | None
    error: str | None = None
    raw: bytes | None = None
    headers: dict[str, str] | None = None
    """The record's headers (a dead letter's ``sluicegate.reason`` and ``.origin``), if any."""

    def as_json(self) -> dict[str, Any]:
        data = {
            "topic": self.topic,
            "partition": self.partition,
            "offset": self.offset,
            "timestamp_ms": self.timestamp_ms,
            "timestamp": None if self.timestamp_ms is None else format_time(self.timestamp_ms),
            "key": self.key,
            "type": type(self.record).__name__ if self.record is not None else None,
            "record": to_json_dict(self.record) if self.record is not None else None,
            "decode_error": self.error,
        }
        if self.headers:
            data["headers"] = self.headers
        if self.error is not None:
            # The undecodable bytes, so that they can be inspected or re-published.
            data["value_base64"] = base64.b64encode(self.raw).decode() if self.raw else None
        return data


def resolve_topics(settings: Settings, names: Sequence[str] | None) -> list[str]:
    """Short topic names to replay: ``names`` (short or full), or every source topic but
    the dead letters (their bytes are what could not be decided: ask for them by name)."""
    known = [spec.name for spec in TOPICS]
    if not names:
        return [spec.name for spec in projected() if spec.role is not Role.DEAD_LETTER]
    result = []
    for name in names:
        short = name.removeprefix(settings.topic_prefix)
        if short not in known:
            raise InvalidFilter(f"unknown topic {name!r}; choose from {', '.join(known)}")
        if short not in result:
            result.append(short)
    return result


@dataclass(frozen=True)
class Gap:
    """Offsets ``first`` to ``end - 1`` of a partition left the topic's retention after the
    replay started and before it read them: they are not in its output."""

    topic: str
    """Short name (without the deployment's prefix)."""
    partition: int
    first: int
    end: int

    def describe(self) -> str:
        return (
            f"{self.topic}[{self.partition}]: offsets {self.first} to {self.end - 1} left the "
            "topic's retention before replay read them; they are not in the output"
        )


def read_topics(
    settings: Settings,
    topics: Sequence[str],
    since_ms: int | None = None,
    on_total: Callable[[int], None] | None = None,
    on_message: Callable[[], None] | None = None,
    *,
    on_gap: Callable[[Gap], None] | None = None,
) -> Iterator[Replayed]:
    """Every committed message of ``topics`` from ``since_ms`` (or the start) to the end.

    The end is each partition's last stable offset when the call starts; messages written
    later are not read. Partitions are read concurrently, so the order across partitions is
    arrival order; within a partition it is offset order. Offsets that retention removes
    while the replay reads (a partition's start moving past its position) are skipped and
    told to ``on_gap``, never skipped in silence.
    """
    admin = admin_client(settings)
    consumer = read_committed_consumer(
        settings,
        group_id=f"{settings.topic_prefix}replay-{uuid.uuid4().hex}",
        tuning={
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            # A position retention removed is an error (handled below), not a silent jump.
            "auto.offset.reset": "error",
            # The end is known: do not let the broker hold empty fetches for long.
            "fetch.wait.max.ms": 50,
        },
    )
    try:
        try:
            # Asked of the consumer: it also learns the partition leaders now, without which
            # an assignment waits for its next metadata refresh (about a second).
            metadata = consumer.list_topics(timeout=10.0).topics
        except KafkaException as e:
            raise KafkaUnavailable(f"cannot reach Kafka at {settings.kafka}: {e}") from e
        partitions = [
            TopicPartition(settings.topic_named(short), p)
            for short in topics
            if settings.topic_named(short) in metadata
            for p in sorted(metadata[settings.topic_named(short)].partitions)
        ]
        if not partitions:
            return
        ends = _offsets(admin, partitions, _LATEST)
        # Explicit start offsets: a logical "beginning" costs the consumer an extra lookup
        # of about half a second.
        starts = _offsets(admin, partitions, _EARLIEST)
        if since_ms is not None:
            found = consumer.offsets_for_times(
                [TopicPartition(tp.topic, tp.partition, since_ms) for tp in partitions],
                timeout=15.0,
            )
            for tp in found:
                # -1: no message at or after since_ms.
                start = int(tp.offset)
                where = (tp.topic, tp.partition)
                starts[where] = ends[where] if start < 0 else start
        pending = {k for k in ends if starts[k] < ends[k]}
        if on_total is not None:
            on_total(sum(ends[k] - starts[k] for k in pending))
        if not pending:
            return
        consumer.assign([TopicPartition(t, p, starts[(t, p)]) for t, p in sorted(pending)])
        prefix = len(settings.topic_prefix)
        position = dict(starts)
        while pending:
            for m in consumer.consume(500, 0.05):
                where = (m.topic() or "", m.partition() or 0)
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        pending.discard(where)
                    elif err.code() == KafkaError._AUTO_OFFSET_RESET and where in pending:
                        gap = _skip_removed(admin, consumer, where, position, ends[where])
                        if gap is not None and on_gap is not None:
                            on_gap(dataclasses.replace(gap, topic=where[0][prefix:]))
                        if position[where] >= ends[where]:
                            pending.discard(where)
                    elif err.fatal():
                        raise FatalKafkaError(f"Kafka consumer failed: {err.str()}")
                    continue
                offset = int(m.offset() or 0)
                if where not in pending or offset >= ends[where]:
                    pending.discard(where)
                    continue
                position[where] = offset + 1
                if offset + 1 >= ends[where]:
                    pending.discard(where)
                if on_message is not None:
                    on_message()
                raw_key = m.key()
                key = raw_key.decode("utf-8", "replace") if isinstance(raw_key, bytes) else raw_key
                ts_type, ts = m.timestamp()
                value = m.value()
                headers = as_text(m.headers()) or None
                record: object | None = None
                error = None
                if value is None:
                    # A dead letter of records never read has none either, and says so.
                    error = "no value" if headers else "tombstone (no value)"
                else:
                    try:
                        record = decode(value)
                    except SchemaError as e:
                        error = f"{type(e).__name__}: {e}"
                yield Replayed(
                    where[0][prefix:],
                    where[1],
                    offset,
                    ts if ts_type else None,
                    key,
                    record,
                    error,
                    value if error is not None else None,
                    headers,
                )
    finally:
        consumer.close()


def _skip_removed(
    admin: AdminClient,
    consumer: Consumer,
    where: tuple[str, int],
    position: dict[tuple[str, int], int],
    end: int,
) -> Gap | None:
    """The partition's position was removed by retention: move ``position`` to its new start
    (assigning the partition afresh there unless that is at or past ``end``: the caller then
    stops reading it) and return the offsets skipped, if any."""
    topic, partition = where
    first = position[where]
    start = _offsets(admin, [TopicPartition(topic, partition)], _EARLIEST)[where]
    position[where] = max(start, first)
    if position[where] < end:
        # The consumer stopped the partition (no seek out of that state): assign it afresh.
        consumer.incremental_unassign([TopicPartition(topic, partition)])
        consumer.incremental_assign([TopicPartition(topic, partition, position[where])])
    skipped_to = min(position[where], end)
    return Gap(topic, partition, first, skipped_to) if skipped_to > first else None


def _offsets(
    admin: AdminClient, partitions: list[TopicPartition], spec: OffsetSpec
) -> dict[tuple[str, int], int]:
    futures = admin.list_offsets(
        {tp: spec for tp in partitions},
        isolation_level=IsolationLevel.READ_COMMITTED,
        request_timeout=15,
    )
    try:
        return {(tp.topic, tp.partition): int(f.result().offset) for tp, f in futures.items()}
    except KafkaException as e:
        raise KafkaUnavailable(f"cannot read offsets from Kafka: {e.args[0].str()}") from e


def csv_columns() -> list[str]:
    """Envelope columns, then every field of every record type (first appearance order)."""
    columns = ["topic", "partition", "offset", "timestamp_ms", "timestamp", "key", "type"]
    for cls in RECORD_CLASSES:
        for f in dataclasses.fields(cls):
            if f.name not in columns:
                columns.append(f.name)
    columns += ["decode_error", "value_base64", "headers"]
    return columns


class Writer:
    """Writes replayed records as JSON lines or CSV to ``out``."""

    def __init__(self, out: TextIO, fmt: str) -> None:
        if fmt not in ("jsonl", "csv"):
            raise InvalidFilter(f"unknown format {fmt!r}; use jsonl or csv")
        self.out = out
        self.fmt = fmt
        self._csv: Any = None
        if fmt == "csv":
            self._columns = csv_columns()
            self._csv = csv.DictWriter(out, self._columns, extrasaction="ignore")
            self._csv.writeheader()

    def write(self, item: Replayed) -> None:
        data = item.as_json()
        if self.fmt == "jsonl":
            self.out.write(orjson.dumps(data).decode("utf-8") + "\n")
            return
        row = {k: v for k, v in data.items() if k != "record"}
        for field, value in (data["record"] or {}).items():
            if field == "type":
                continue
            row[field] = orjson.dumps(value).decode() if isinstance(value, list) else value
        if item.headers:
            row["headers"] = orjson.dumps(item.headers).decode()
        self._csv.writerow({k: "" if v is None else v for k, v in row.items()})
