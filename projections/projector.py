"""The projector: every event topic -> PostgreSQL, each message exactly once.

Commit order, per batch (this is the whole guarantee):

1. poll a batch from Kafka (``read_committed``: aborted transactions never arrive);
2. in ONE PostgreSQL transaction: take the schema's writer lock, check that the stored
   offsets are the ones this projector last wrote, upsert the batch's rows, store the next
   offset of every partition the batch touched;
3. commit that transaction. Kafka consumer-group offsets are never committed: partitions are
   assigned explicitly, from the offsets stored in PostgreSQL.

So the rows and the position that produced them commit or vanish together. A kill -9, or a
PostgreSQL outage, at any point leaves the database at the end of some whole batch; on start
(or after reconnecting) the projector re-reads the stored offsets and seeks there, so nothing
is skipped and nothing applied twice. Every handler is idempotent as well, which keeps even a
replay of an already-applied batch harmless.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import psycopg
from confluent_kafka import (
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

from projections.db import describe_dsn, schema_name
from projections.errors import OffsetsMoved, ProjectionError, TopicRecreated
from projections.handlers import Source, park, project
from projections.migrate import migrate
from projections.model import RowOp
from projections.store import Offsets, Store
from schemas.codec import decode
from schemas.errors import SchemaError
from schemas.topics import projected
from streams.kafka.clients import admin_client, read_committed_consumer
from streams.settings import Settings

log = logging.getLogger("sluicegate.projector")

_EARLIEST = OffsetSpec.earliest()  # type: ignore[no-untyped-call]
_LATEST = OffsetSpec.latest()  # type: ignore[no-untyped-call]

# (partition, offset, rows, raw value) of one consumed message.
_Mapped = tuple[tuple[str, int], int, list[RowOp], bytes | None]


def source_topics() -> tuple[str, ...]:
    """Short names of the topics projected: every catalogue topic but state changelogs and
    dead letters (``schemas.topics.projected``); topics added later are picked up."""
    return tuple(spec.name for spec in projected())


@dataclass
class ProjectorStats:
    """Counts since this projector object was created."""

    messages: int = 0
    parked: int = 0
    batches: int = 0
    reconnects: int = 0
    reseeks: int = 0
    started: float = field(default_factory=time.monotonic)


def _consumer(settings: Settings, schema: str) -> Consumer:
    return read_committed_consumer(
        settings,
        # Required by librdkafka even though this consumer never joins the group or
        # commits: partitions are assigned from the offsets stored in PostgreSQL.
        group_id=f"{settings.topic_prefix}projector.{schema}",
        tuning={
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            # Only reached when a stored offset fell out of retention: start at the oldest.
            "auto.offset.reset": "earliest",
            # Short broker-side waits on empty fetches: a partition's end (and so "caught
            # up") is noticed within ~100 ms, at the cost of a few idle requests a second.
            "fetch.wait.max.ms": 100,
        },
    )


class Projector:
    """Projects the source topics of ``settings`` into ``schema`` (default: the live one).

    :meth:`run` follows the topics until ``stop`` is set; :meth:`run_until` catches up to
    given end offsets (default: the ends when called) and returns. Both resume from the
    offsets stored in the schema. Not thread-safe; one object per thread.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        schema: str | None = None,
        topics: tuple[str, ...] | None = None,
        batch_size: int = 2000,
        poll_timeout_s: float = 0.2,
        stop: threading.Event | None = None,
        on_progress: Callable[[int], None] | None = None,
    ) -> None:
        self.settings = settings
        self.schema = schema or schema_name(settings.topic_prefix)
        self.topics = topics or source_topics()
        self.batch_size = batch_size
        self.poll_timeout_s = poll_timeout_s
        self.stop = stop or threading.Event()
        self.on_progress = on_progress
        self.stats = ProjectorStats()
        self._conn: psycopg.Connection | None = None
        self._store: Store | None = None
        self._positions: Offsets = {}
        self._partitions: set[tuple[str, int]] = set()
        self._consumer: Consumer | None = None
        self._admin_client: AdminClient | None = None
        self._full = {settings.topic_named(t): t for t in self.topics}
        self._last_discovery = 0.0
        self._warned: set[str] = set()
        self._warned_at: dict[str, float] = {}

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Close the consumer and the connection (nothing is committed to Kafka)."""
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
        self._close_pg()

    def __enter__(self) -> Projector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def positions(self) -> Offsets:
        """The next offset per (short topic, partition) as last stored by this projector."""
        return dict(self._positions)

    def run(self) -> None:
        """Follow the topics until :attr:`stop` is set (the current batch finishes first)."""
        self._start()
        reported, last = time.monotonic(), 0
        while not self.stop.is_set():
            if time.monotonic() - self._last_discovery > 10.0:
                try:
                    self._discover_and_assign(only_if_changed=True)
                except TopicRecreated:
                    raise
                except ProjectionError as e:
                    # Kafka unreachable for a moment: keep consuming what is assigned.
                    self._last_discovery = time.monotonic()
                    self._kafka_warning(str(e))
            self._step(None)
            if time.monotonic() - reported >= 60.0:
                done = self.stats.messages - last
                log.info(
                    "projected %d messages in the last minute (%.0f/s), %d parked in total",
                    done,
                    done / (time.monotonic() - reported),
                    self.stats.parked,
                )
                reported, last = time.monotonic(), self.stats.messages

    def run_until(
        self, until: Mapping[tuple[str, int], int] | None = None, timeout_s: float | None = None
    ) -> Offsets:
        """Project up to ``until`` (next offsets per partition; default: the current ends).

        Never applies a message at or beyond ``until``; when it returns, the stored offset of
        every partition in ``until`` equals it. Raises :class:`ProjectionError` on timeout
        or when ``until`` lies beyond a partition's end.
        """
        self._start()
        target = dict(until) if until is not None else self.end_offsets()
        ends = self.end_offsets()
        beyond = {tp: o for tp, o in target.items() if o > ends.get(tp, 0)}
        if beyond:
            raise TopicRecreated(
                f"target offsets {beyond} lie beyond the ends of their partitions {ends}"
            )
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while not self._reached(target):
            if self.stop.is_set():
                raise ProjectionError("stopped before catching up")
            if deadline is not None and time.monotonic() > deadline:
                raise ProjectionError(
                    f"projector did not reach {target} within {timeout_s} s (at {self._positions})"
                )
            self._step(target)
        return dict(self._positions)

    def _reached(self, target: Mapping[tuple[str, int], int]) -> bool:
        return all(self._positions.get(tp, 0) >= o for tp, o in target.items())

    def end_offsets(self) -> Offsets:
        """The current read_committed end (last stable offset) of every source partition."""
        return self._list_offsets(self._discover(), _LATEST)

    def _list_offsets(self, partitions: set[tuple[str, int]], spec: OffsetSpec) -> Offsets:
        # Asked of a separate admin client: the assigned consumer's connection is busy with
        # long-polling fetches, behind which such requests would wait up to half a second.
        if not partitions:
            return {}
        request = {
            TopicPartition(self.settings.topic_named(short), partition): spec
            for short, partition in partitions
        }
        try:
            futures = self._admin().list_offsets(
                request, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=15
            )
            return {
                (self._full[tp.topic], tp.partition): int(future.result().offset)
                for tp, future in futures.items()
            }
        except KafkaException as e:
            raise ProjectionError(
                f"cannot read offsets from Kafka at {self.settings.kafka}: {e.args[0].str()}"
            ) from e

    # -- PostgreSQL --------------------------------------------------------------------------

    def _start(self) -> None:
        if self._store is None:
            self._connect_with_backoff()

    def _open_pg(self) -> None:
        conn = psycopg.connect(
            self.settings.pg_dsn,
            connect_timeout=5,
            application_name=f"sluicegate-projector:{self.schema}"[:63],
        )
        try:
            migrate(conn, self.schema, self.settings.topic_prefix)
            store = Store(conn, self.schema)
            positions = store.load_offsets()
        except BaseException:
            conn.close()
            raise
        self._conn, self._store, self._positions = conn, store, positions

    def _close_pg(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()
        self._conn = None
        self._store = None

    def _connect_with_backoff(self) -> None:
        """(Re)connect, migrate, re-read the stored offsets and seek there; retry until up."""
        delay = 0.1
        while True:
            self._close_pg()
            try:
                self._open_pg()
                self._discover_and_assign(only_if_changed=False)
                return
            except (psycopg.OperationalError, psycopg.InterfaceError) as e:
                first = (str(e).strip().splitlines() or [type(e).__name__])[0]
                log.warning(
                    "PostgreSQL at %s unavailable (%s); retrying in %.1f s",
                    describe_dsn(self.settings.pg_dsn),
                    first,
                    delay,
                )
            if self.stop.wait(delay):
                raise ProjectionError("stopped while waiting for PostgreSQL")
            delay = min(delay * 2, 5.0)

    # -- Kafka -------------------------------------------------------------------------------

    def _admin(self) -> AdminClient:
        if self._admin_client is None:
            self._admin_client = admin_client(self.settings)
        return self._admin_client

    def _kafka(self) -> Consumer:
        if self._consumer is None:
            consumer = _consumer(self.settings, self.schema)
            # Learn the partition leaders now: an assignment made before the consumer has
            # metadata for its topics waits for the next refresh, about a second.
            try:
                consumer.list_topics(timeout=10.0)
            except KafkaException as e:
                consumer.close()
                raise ProjectionError(
                    f"cannot reach Kafka at {self.settings.kafka}: {e.args[0].str()}"
                ) from e
            self._consumer = consumer
        return self._consumer

    def _discover(self) -> set[tuple[str, int]]:
        try:
            topics = self._admin().list_topics(timeout=10.0).topics
        except KafkaException as e:
            raise ProjectionError(
                f"cannot reach Kafka at {self.settings.kafka}: {e.args[0].str()}"
            ) from e
        found: set[tuple[str, int]] = set()
        for full, short in self._full.items():
            meta = topics.get(full)
            if meta is None or meta.error is not None or not meta.partitions:
                if full not in self._warned:
                    self._warned.add(full)
                    log.warning("topic %s does not exist (yet); it will be picked up", full)
                continue
            found.update((short, p) for p in meta.partitions)
        self._last_discovery = time.monotonic()
        return found

    def _discover_and_assign(self, *, only_if_changed: bool) -> None:
        partitions = self._discover()
        if only_if_changed and partitions == self._partitions:
            return
        consumer = self._kafka()
        # Explicit offsets everywhere: a logical "beginning" costs the consumer an extra
        # lookup of about half a second per assignment.
        lows = self._list_offsets(partitions, _EARLIEST)
        highs = self._list_offsets({tp for tp in partitions if tp in self._positions}, _LATEST)
        assignment = []
        for short, partition in sorted(partitions):
            full = self.settings.topic_named(short)
            stored = self._positions.get((short, partition))
            if stored is not None:
                low, high = lows[(short, partition)], highs[(short, partition)]
                if stored > high:
                    raise TopicRecreated(
                        f"{full}[{partition}]: stored offset {stored} is beyond the end "
                        f"({high}); the topic was recreated. Run `sluicegate projections "
                        "rebuild` to project it afresh."
                    )
                if stored < low:
                    log.warning(
                        "%s[%d]: %d messages left retention before they were projected",
                        full,
                        partition,
                        low - stored,
                    )
            offset = lows[(short, partition)] if stored is None else stored
            assignment.append(TopicPartition(full, partition, offset))
        # A re-seek to the stored offsets: dropping the old assignment first discards
        # everything fetched under it, so no message from before the seek can arrive after.
        consumer.unassign()
        consumer.assign(assignment)
        self._partitions = partitions
        log.info("projecting %d partitions into schema %s", len(assignment), self.schema)

    # -- one batch ---------------------------------------------------------------------------

    def _step(self, until: Mapping[tuple[str, int], int] | None) -> None:
        consumer = self._kafka()
        messages = consumer.consume(self.batch_size, self.poll_timeout_s)
        per_message: list[_Mapped] = []
        advance: Offsets = {}
        for m in messages:
            tp, offset = self._where(m)
            if tp is None:
                continue
            current = advance.get(tp, self._positions.get(tp, 0))
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    # The end may lie past the last message (transaction markers): store it,
                    # so that "caught up" means stored offset == end.
                    end = offset if until is None else min(offset, until.get(tp, 0))
                    if end > current:
                        advance[tp] = end
                elif err.fatal():
                    raise ProjectionError(f"Kafka consumer failed: {err.str()}")
                else:
                    self._kafka_warning(err.str())
                continue
            if offset < current:
                continue  # fetched before a re-seek; already applied
            if until is not None and offset >= until.get(tp, 0):
                # Everything before it has been consumed (partitions are ordered).
                if until.get(tp, 0) > current:
                    advance[tp] = until.get(tp, 0)
                continue
            per_message.append((tp, offset, self._map(m, tp, offset), m.value()))
            advance[tp] = offset + 1
        if advance:
            self._write(per_message, advance)

    def _kafka_warning(self, text: str) -> None:
        # librdkafka reports a lost broker on every poll; say it once per 30 s per message.
        now = time.monotonic()
        if now - self._warned_at.get(text, -1e9) >= 30.0:
            self._warned_at[text] = now
            log.warning("Kafka: %s", text)

    def _where(self, m: Message) -> tuple[tuple[str, int] | None, int]:
        short = self._full.get(m.topic() or "")
        partition = m.partition()
        if short is None or partition is None:
            err = m.error()
            if err is not None and err.code() != KafkaError._PARTITION_EOF:
                self._kafka_warning(err.str())
            return None, 0
        return (short, partition), int(m.offset() or 0)

    def _map(self, m: Message, tp: tuple[str, int], offset: int) -> list[RowOp]:
        raw_key = m.key()
        key = raw_key.decode("utf-8", "replace") if isinstance(raw_key, bytes) else raw_key
        ts_type, ts = m.timestamp()
        source = Source(tp[0], tp[1], offset, key, ts if ts_type else None)
        value = m.value()
        if value is None:
            return []  # a compaction tombstone: nothing to project
        try:
            record = decode(value)
        except SchemaError as e:
            self.stats.parked += 1
            log.error("parked %s[%d]@%d: %s", tp[0], tp[1], offset, e)
            return park(source, value, f"{type(e).__name__}: {e}")
        return project(source, record)

    def _write(
        self,
        per_message: list[_Mapped],
        advance: Offsets,
    ) -> None:
        assert self._store is not None
        ops = [op for _, _, msg_ops, _ in per_message for op in msg_ops]
        try:
            try:
                self._store.write(ops, advance, self._positions)
                self._positions.update(advance)
            except (psycopg.DataError, psycopg.IntegrityError) as e:
                log.error("batch refused by PostgreSQL (%s); writing it message by message", e)
                self._write_isolated(per_message, advance)
        except OffsetsMoved:
            log.warning("stored offsets moved (rebuild swap or second projector); re-seeking")
            self.stats.reseeks += 1
            self._reload()
            return
        except psycopg.Error as e:
            # Connection lost, server restarted, schema dropped...: the transaction rolled
            # back (or its outcome is unknown); the stored offsets say which.
            log.warning("PostgreSQL error (%s): %s; reconnecting", type(e).__name__, e)
            self.stats.reconnects += 1
            self._connect_with_backoff()
            return
        self.stats.batches += 1
        self.stats.messages += len(per_message)
        if self.on_progress is not None:
            self.on_progress(len(per_message))

    def _write_isolated(
        self,
        per_message: list[_Mapped],
        advance: Offsets,
    ) -> None:
        """Write a batch one message per transaction, parking any message PostgreSQL refuses.

        Only data errors get here (a value PostgreSQL cannot store); parking keeps the
        projector moving without dropping the message.
        """
        assert self._store is not None
        for tp, offset, ops, value in per_message:
            step = {tp: offset + 1}
            try:
                self._store.write(ops, step, self._positions)
            except (psycopg.DataError, psycopg.IntegrityError) as e:
                text = f"PostgreSQL refused the rows: {type(e).__name__}: {e}"
                log.error("parked %s[%d]@%d: %s", tp[0], tp[1], offset, text)
                self.stats.parked += 1
                source = Source(tp[0], tp[1], offset)
                self._store.write(park(source, value, text), step, self._positions)
            self._positions.update(step)
        rest = {tp: o for tp, o in advance.items() if o > self._positions.get(tp, 0)}
        if rest:
            self._store.write([], rest, self._positions)
            self._positions.update(rest)

    def _reload(self) -> None:
        assert self._store is not None
        self._positions = self._store.load_offsets()
        self._discover_and_assign(only_if_changed=False)
