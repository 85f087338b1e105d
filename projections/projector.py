"""The projector: every event topic -> PostgreSQL, each message exactly once.

Commit order, per batch (this is the whole guarantee):

1. poll a batch from Kafka (``read_committed``: aborted transactions never arrive);
2. in ONE PostgreSQL transaction: take the schema's writer lock, check that the stored
   offsets are the ones this projector last wrote, upsert the batch's rows, store the next
   offset of every partition the batch touched;
3. commit that transaction. Kafka consumer-group offsets are never committed: partitions are
   assigned explicitly, from the offsets stored in PostgreSQL.

One batch is written while the next is polled and mapped (a writer thread, one transaction
in flight at most): step 2 of batch N+1 starts only once batch N has committed, and a batch
mapped while its predecessor failed is dropped and read again from the stored offsets.

A bulk load (``held_rows``, what a rebuild runs) is the one exception: step 2 holds the
merged tables' rows back in memory and later transactions write them, which is only for a
schema nobody reads before :meth:`Projector.run_until` returns.

A partition whose next offset has left the topic's retention (a projector stopped, or
behind, for longer than the topic keeps records) makes the consumer stop it with
``_AUTO_OFFSET_RESET`` (``auto.offset.reset=error``: it never jumps by itself). The batch
then records the skipped offsets in ``retention_gaps`` and moves the stored offset to the
partition's first offset in the same transaction, and the consumer is assigned there once
that has committed.

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
from concurrent.futures import Future
from dataclasses import dataclass, field

import psycopg
from confluent_kafka import (
    KafkaError,
    Message,
)

from projections.batch_writer import BatchWriter, Mapped
from projections.db import schema_name
from projections.errors import OffsetsMoved, ProjectionError, TopicRecreated
from projections.handlers import Source, park, project
from projections.model import RowOp
from projections.retry import FailuresInARow, one_line
from projections.rows import dead_letter, retention_gap
from projections.share import Share
from projections.siblings import SiblingWatch
from projections.sources import Sources, source_topics
from projections.store import Offsets
from schemas.codec import decode
from schemas.errors import SchemaError
from schemas.topics import DEAD_LETTERS
from streams import collector
from streams.engine import lag
from streams.kafka.consuming import take
from streams.settings import Settings

log = logging.getLogger("sluicegate.projector")

_DEAD_LETTERS = DEAD_LETTERS.name


@dataclass
class ProjectorStats:
    """Counts since this projector object was created."""

    messages: int = 0
    parked: int = 0
    batches: int = 0
    reconnects: int = 0
    reseeks: int = 0
    started: float = field(default_factory=time.monotonic)


class Projector:
    """Projects the source topics of ``settings`` into ``schema`` (default: the live one).

    :meth:`run` follows the topics until ``stop`` is set; :meth:`run_until` catches up to
    given end offsets (default: the ends when called) and returns. Both resume from the
    offsets stored in the schema. Not thread-safe; one object per thread.

    ``durable_batches=False`` commits batches without waiting for the WAL flush
    (``synchronous_commit = off``): a PostgreSQL crash may then lose the last batches, rows
    and offsets together (so they are projected again), which is only for a schema nobody
    reads before a durable commit follows, such as a rebuild's fresh schema before its swap.

    ``held_rows > 0`` makes :meth:`run_until` a bulk load: the rows of the merged tables (all
    but ``event_log``) are held back in memory across batches, merged by the tables'
    policies, and written when more than ``held_rows`` are held and before it returns. The
    offsets stored per batch then run ahead of the rows held back, so that too is only for a
    schema nobody reads or resumes before :meth:`run_until` returns (a rebuild's). Rows
    PostgreSQL refuses then raise :class:`~projections.errors.HeldRowsRefused` instead of
    being parked; a projector that stops early (timeout, stop) leaves them unwritten. Stored
    offsets that moved under a bulk load are a :class:`ProjectionError`: another writer is
    writing a schema only the load should, and re-seeking would write over it.

    ``share`` (a :class:`~projections.share.Share`) limits the projector to those partitions:
    it assigns, checks and stores only theirs, so the workers of a parallel rebuild
    (:mod:`projections.parallel_load`) write one schema side by side.
    """

    DEFAULT_BATCH = 10_000
    """Messages per consume call and PostgreSQL transaction, unless ``batch_size`` says."""

    STALLED_AFTER_S = 60.0
    """A following projector whose loop has not come round for this long (and that is not
    waiting for PostgreSQL) is not worth keeping (:meth:`alive`): a batch of
    :data:`DEFAULT_BATCH` takes about a second."""

    def __init__(
        self,
        settings: Settings,
        *,
        schema: str | None = None,
        topics: tuple[str, ...] | None = None,
        batch_size: int = DEFAULT_BATCH,
        poll_timeout_s: float = 0.2,
        stop: threading.Event | None = None,
        on_progress: Callable[[int], None] | None = None,
        durable_batches: bool = True,
        held_rows: int = 0,
        share: Share | None = None,
        pause: Callable[[float], object] | None = None,
    ) -> None:
        """``pause(seconds)`` waits between failures in a row (``retry.py``); by default it
        is :attr:`stop`'s ``wait``, which a stop ends early."""
        self.settings = settings
        self.share = share
        self.schema = schema or schema_name(settings.topic_prefix)
        self.topics = topics or source_topics()
        self.batch_size = batch_size
        self.poll_timeout_s = poll_timeout_s
        self.stop = stop or threading.Event()
        self.on_progress = on_progress
        self.durable_batches = durable_batches
        self.stats = ProjectorStats()
        self._pause = pause or self.stop.wait
        self._failures = FailuresInARow()
        self._pausing = False
        self._writer = BatchWriter(
            settings,
            self.schema,
            durable=durable_batches,
            held_rows=held_rows,
            stop=self.stop,
            share=share,
        )
        self._positions: Offsets = {}
        self._ahead: Offsets = {}
        """The positions once the batch in flight has committed (:attr:`_positions` else)."""
        self._pending: tuple[Future[tuple[Offsets, int]], int] | None = None
        """The batch being written: its outcome (positions after it, parked) and size."""
        self._left_behind = False
        """Whether a step passed over messages (or an end) at or past its target: they are no
        longer in the consumer's stream, so a further target must seek back for them."""
        self._sources = Sources(settings, self.schema, self.topics, share)
        self.siblings = SiblingWatch(share) if share is not None and share.count > 1 else None
        """What :meth:`run` has seen of the other shares (None without a share)."""
        self.came_round_at = time.monotonic()
        """Monotonic time :meth:`run`'s loop last came round (construction, before it runs)."""
        self.lag: tuple[lag.PartitionLag, ...] = ()
        """How far the stored offsets are behind the partitions' ends, as :meth:`run`'s loop
        last sampled it (``GET /metrics`` on its probes' listener)."""
        self._lag_due = 0.0

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Close the consumer and the connection (nothing is committed to Kafka); a batch
        still being written commits or rolls back first."""
        if self._pending is not None:
            with contextlib.suppress(Exception):
                self._pending[0].result()
            self._pending = None
        self._writer.close()
        self._sources.close()

    def __enter__(self) -> Projector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def alive(self, now: float) -> bool:
        """Whether the projector is worth keeping: its loop came round within
        :data:`STALLED_AFTER_S`, or it is waiting for PostgreSQL (which it does for as long as
        PostgreSQL is away: restarting it would not bring PostgreSQL back), or its batch is
        waiting for the writers' lock another writer holds (``rebuild --verify`` holds it as
        long as it compares) and PostgreSQL said so within :data:`STALLED_AFTER_S`."""
        return (
            self.waiting_for_postgresql
            or now - self.came_round_at <= self.STALLED_AFTER_S
            or now - self._writer.lock_answered_at <= self.STALLED_AFTER_S
        )

    @property
    def connected(self) -> bool:
        """Whether the projector is connected to PostgreSQL (not waiting for it)."""
        return self._writer.connected and not self._writer.connecting

    @property
    def waiting_for_postgresql(self) -> bool:
        """Whether the projector is (re)connecting to PostgreSQL now, retrying while it is
        unavailable, or waiting to try again after PostgreSQL refused batches in a row."""
        return self._writer.connecting or self._pausing

    def positions(self) -> Offsets:
        """The next offset per (short topic, partition) as last stored by this projector."""
        return dict(self._positions)

    def run(self) -> None:
        """Follow the topics until :attr:`stop` is set (the current batch finishes first)."""
        if self._writer.held is not None:
            raise ProjectionError("a projector that holds rows back only catches up (run_until)")
        self._start()
        with collector.paused() as pause:
            self._follow(pause)
            self._settle()

    def _follow(self, pause: collector.Pause) -> None:
        reported, last = time.monotonic(), 0
        while not self.stop.is_set():
            self.came_round_at = time.monotonic()
            if time.monotonic() - self._sources.last_discovery > 10.0:
                self._settle()
                try:
                    self._assign(only_if_changed=True)
                except TopicRecreated:
                    raise
                except ProjectionError as e:
                    # Kafka unreachable for a moment: keep consuming what is assigned.
                    self._sources.last_discovery = time.monotonic()
                    self._sources.warning(str(e))
                except psycopg.Error as e:  # comparing the topics' ids (topic_ids.py)
                    self._sources.last_discovery = time.monotonic()
                    self._reconnect_after(e)
            self._watch_siblings()
            self._step(None)
            self._sample_lag()
            pause.tick()
            if time.monotonic() - reported >= 60.0:
                done = self.stats.messages - last
                log.info(
                    "projected %d messages in the last minute (%.0f/s), %d parked in total",
                    done,
                    done / (time.monotonic() - reported),
                    self.stats.parked,
                )
                reported, last = time.monotonic(), self.stats.messages

    def _sample_lag(self) -> None:
        """At most once a second, :attr:`lag`: from each assigned partition's stored offset
        (0 for one nothing of which was stored yet) to its end as the consumer last saw it
        (:mod:`streams.engine.lag`)."""
        now = time.monotonic()
        if now < self._lag_due:
            return
        self._lag_due = now + lag.SAMPLE_EVERY_S
        consumer = self._sources.consumer()
        named = self.settings.topic_named
        stored = {(named(topic), p): offset for (topic, p), offset in self._positions.items()}
        for tp in consumer.assignment():
            stored.setdefault((tp.topic, tp.partition), 0)
        self.lag = lag.sample(consumer, stored)

    def _watch_siblings(self) -> None:
        """With a share, warn of the other shares nobody projects (:mod:`projections.siblings`);
        called between batches. A failure to look is only logged: the batches meet the same
        Kafka and PostgreSQL and handle them."""
        watch, now = self.siblings, time.monotonic()
        if watch is None or not watch.due(now):
            return
        self._settle()  # the stored offsets are read on the writer's connection
        try:
            ends = self._sources.end_offsets(every_share=True)
            stored = self._writer.stored_offsets(every_share=True)
        except (ProjectionError, psycopg.Error) as e:
            watch.checked_at = now
            log.info("could not look at the other shares' offsets: %s", e)
            return
        for warning in watch.observe(now, stored, ends):
            log.warning("%s", warning)

    def run_until(
        self, until: Mapping[tuple[str, int], int] | None = None, timeout_s: float | None = None
    ) -> Offsets:
        """Project up to ``until`` (next offsets per partition; default: the current ends).

        Never applies a message at or beyond ``until``; when it returns, the stored offset of
        every partition in ``until`` equals it. Raises :class:`ProjectionError` on timeout
        or when ``until`` lies beyond a partition's end.
        """
        self._start()
        if self._left_behind:
            self._assign(only_if_changed=False)
            self._left_behind = False
        target = dict(until) if until is not None else self._sources.end_offsets()
        ends = self._sources.end_offsets()
        beyond = {tp: o for tp, o in target.items() if o > ends.get(tp, 0)}
        if beyond:
            raise TopicRecreated(
                f"target offsets {beyond} lie beyond the ends of their partitions {ends}"
            )
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with collector.paused() as pause:
            while not self._reached(target, self._positions):
                if self._pending is not None and self._reached(target, self._ahead):
                    self._settle()
                    continue
                if self.stop.is_set():
                    self._settle()
                    raise ProjectionError("stopped before catching up")
                if deadline is not None and time.monotonic() > deadline:
                    self._settle()
                    raise ProjectionError(
                        f"projector did not reach {target} within {timeout_s} s "
                        f"(at {self._positions})"
                    )
                self._step(target)
                pause.tick()
            self._settle()  # nothing should be in flight here; if something is, it lands first
            self._flush_held()
        return dict(self._positions)

    def check(self) -> Offsets:
        """Connect (migrating the schema) and assign, as :meth:`run` starts, projecting
        nothing: the stored offsets, once the topics are known to be those they were stored
        from (ids recorded where none is yet, ``topic_ids.py``) and none lies beyond its
        partition's end; :class:`TopicRecreated` otherwise."""
        self._start()
        return dict(self._positions)

    def end_offsets(self) -> Offsets:
        """The current read_committed end (last stable offset) of every source partition."""
        return self._sources.end_offsets()

    @staticmethod
    def _reached(target: Mapping[tuple[str, int], int], positions: Offsets) -> bool:
        return all(positions.get(tp, 0) >= o for tp, o in target.items())

    # -- PostgreSQL --------------------------------------------------------------------------

    def _start(self) -> None:
        if not self._writer.connected:
            self._connect_with_backoff()

    def _connect_with_backoff(self) -> None:
        """(Re)connect, migrate, re-read the stored offsets and seek there; retry until up."""
        self._positions = self._writer.connect()
        self._ahead = dict(self._positions)
        self._assign(only_if_changed=False)

    def _assign(self, *, only_if_changed: bool) -> None:
        """Assign the source partitions at the stored offsets, each topic once it is known to
        be the one its offsets were stored from (``topic_ids.py``)."""
        self._sources.assign(
            self._positions, only_if_changed=only_if_changed, claim=self._writer.claim_topics
        )

    # -- one batch ---------------------------------------------------------------------------

    def _step(self, until: Mapping[tuple[str, int], int] | None) -> None:
        consumer = self._sources.consumer()
        # take(), not consume(batch_size, timeout): consume returns only once it has a whole
        # batch or the timeout has passed, so under light load every record (and the end of
        # partition that settles a transaction marker) waited out poll_timeout_s.
        messages = take(consumer, self.batch_size, self.poll_timeout_s)
        per_message: list[Mapped] = []
        advance: Offsets = {}
        gapped: set[tuple[str, int]] = set()
        for m in messages:
            tp, offset = self._sources.where(m)
            if tp is None:
                continue
            current = advance.get(tp, self._ahead.get(tp, 0))
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    # The end may lie past the last message (transaction markers): store it,
                    # so that "caught up" means stored offset == end.
                    end = offset if until is None else min(offset, until.get(tp, 0))
                    self._left_behind = self._left_behind or end < offset
                    if end > current:
                        advance[tp] = end
                elif err.code() == KafkaError._AUTO_OFFSET_RESET and tp not in gapped:
                    # The consumer stopped the partition: nothing more of it in this batch.
                    start = self._skip_gap(tp, current)
                    per_message.append((tp, start - 1, retention_gap(*tp, current, start), None))
                    advance[tp] = start
                    gapped.add(tp)
                elif err.fatal():
                    raise ProjectionError(f"Kafka consumer failed: {err.str()}")
                else:
                    self._sources.warning(err.str())
                continue
            if offset < current:
                continue  # fetched before a re-seek; already applied
            if until is not None and offset >= until.get(tp, 0):
                # Everything before it has been consumed (partitions are ordered).
                self._left_behind = True
                if until.get(tp, 0) > current:
                    advance[tp] = until.get(tp, 0)
                continue
            per_message.append((tp, offset, self._map(m, tp, offset), m.value()))
            advance[tp] = offset + 1
        if not self._settle():
            return  # re-seeked: what this step consumed is read again from the stored offsets
        if advance:
            expected = dict(self._ahead)
            self._ahead.update(advance)
            future = self._writer.submit(per_message, advance, expected)
            self._pending = (future, len(per_message) - len(gapped))
        # The consumer stopped those partitions; once the gaps are stored, assign them there.
        if gapped and self._settle():
            self._assign(only_if_changed=False)

    def _skip_gap(self, tp: tuple[str, int], current: int) -> int:
        """The first offset ``tp`` still holds, beyond ``current``, which left retention
        before it was projected; :class:`TopicRecreated` when ``current`` lies beyond the
        end instead (the topic holds fewer records than were read from it)."""
        start, end = self._sources.bounds(tp)
        if start <= current:
            raise TopicRecreated(
                f"{self.settings.topic_named(tp[0])}[{tp[1]}]: offset {current} is out of "
                f"range ({start} to {end}) and not behind the start; the topic was recreated. "
                "Run `sluicegate projections rebuild --drop-history` to project it afresh."
            )
        log.warning(
            "%s[%d]: offsets %d to %d left retention before they were projected; the read "
            "model lacks their records (recorded in retention_gaps)",
            self.settings.topic_named(tp[0]),
            tp[1],
            current,
            start - 1,
        )
        return start

    def _map(self, m: Message, tp: tuple[str, int], offset: int) -> list[RowOp]:
        raw_key = m.key()
        key = raw_key.decode("utf-8", "replace") if isinstance(raw_key, bytes) else raw_key
        ts_type, ts = m.timestamp()
        source = Source(tp[0], tp[1], offset, key, ts if ts_type else None)
        value = m.value()
        if tp[0] == _DEAD_LETTERS:
            return dead_letter(source, m.headers(), value)
        if value is None:
            return []  # a compaction tombstone: nothing to project
        try:
            record = decode(value)
        except SchemaError as e:
            self.stats.parked += 1
            log.error("parked %s[%d]@%d: %s", tp[0], tp[1], offset, e)
            return park(source, value, f"{type(e).__name__}: {e}")
        return project(source, record)

    def _flush_held(self) -> None:
        """Write the rows held back (``held_rows``), reconnecting while PostgreSQL is away."""
        while self._writer.held is not None and len(self._writer.held):
            try:
                self._writer.flush_held(self._positions)
            except psycopg.Error as e:
                self._reconnect_after(e)
        self._failures.succeeded()

    def _settle(self) -> bool:
        """Wait for the batch in flight; False when it failed and the consumer was re-seeked
        to the stored offsets (after reconnecting, when the connection was the problem)."""
        if self._pending is None:
            return True
        future, count = self._pending
        self._pending = None
        try:
            self._positions, parked = future.result()
        except OffsetsMoved:
            log.warning("stored offsets moved (rebuild swap or second projector); re-seeking")
            self.stats.reseeks += 1
            self._reload()
            return False
        except psycopg.Error as e:
            # Connection lost, server restarted, schema dropped...: the transaction rolled
            # back (or its outcome is unknown); the stored offsets say which.
            self._reconnect_after(e)
            return False
        self._failures.succeeded()
        self.stats.parked += parked
        self.stats.batches += 1
        self.stats.messages += count
        if self.on_progress is not None:
            self.on_progress(count)
        return True

    def _reconnect_after(self, error: psycopg.Error) -> None:
        """Reconnect after PostgreSQL refused a batch (or the look at the topics' ids): at
        once after a first failure, after a pause disconnected after each further one in a
        row (``retry.py``); one warning line each."""
        self.stats.reconnects += 1
        wait_s = self._failures.failed()
        what = f"PostgreSQL error ({type(error).__name__}): {one_line(error)}"
        if not wait_s:
            log.warning("%s; reconnecting", what)
        else:
            log.warning(
                "%s; failed %d times in a row, reconnecting in %g s",
                what,
                self._failures.count,
                wait_s,
            )
            self._writer.disconnect()
            self._pausing = True
            try:
                self._pause(wait_s)
            finally:
                self._pausing = False
        self._connect_with_backoff()

    def _reload(self) -> None:
        self._positions = self._writer.stored_offsets()
        self._ahead = dict(self._positions)
        self._assign(only_if_changed=False)
