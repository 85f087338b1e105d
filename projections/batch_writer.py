"""The PostgreSQL side of the projector: its connection, its batches and held-back rows.

A :class:`BatchWriter` owns one connection (migrated, with its :class:`~projections.store.Store`)
and one helper thread on which batches are written, one at a time; the projector maps the
next batch meanwhile and waits for the outcome before it submits another. Errors are the
caller's to handle: a refused batch is written again message by message here (parking what
PostgreSQL refuses), everything else propagates (see :mod:`projections.projector` for the
commit order).
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor

import psycopg
from psycopg.conninfo import conninfo_to_dict

from projections import topic_ids
from projections.db import describe_dsn, note_lock_holders
from projections.errors import HeldRowsRefused, OffsetsMoved, ProjectionError
from projections.handlers import Source, park
from projections.migrate import migrate
from projections.model import RowBuffer, RowOp
from projections.retry import one_line
from projections.share import Share
from projections.store import Offsets, Store
from streams.settings import Settings

log = logging.getLogger("sluicegate.projector")

Mapped = tuple[tuple[str, int], int, list[RowOp], bytes | None]
"""(partition, offset, rows, raw value) of one consumed message."""


TABLE_LOCK_WAIT_S = 10.0
"""How long a writer's statement waits for a table another session holds (``LOCK TABLE``,
``ALTER TABLE``, a ``CREATE INDEX`` without ``CONCURRENTLY``, ``VACUUM FULL``): then it
fails with ``LockNotAvailable`` noting who holds the schema's tables, and the projector
says so and tries again (reconnecting, backing off), instead of waiting in silence until
it is taken for stalled."""


def _options(dsn: str, *, durable: bool) -> str:
    """The lock wait, then the DSN's own ``options`` (a ``lock_timeout`` there wins), then
    ``synchronous_commit = off`` unless ``durable``."""
    given = str(conninfo_to_dict(dsn).get("options") or "")
    wait = f"-c lock_timeout={round(TABLE_LOCK_WAIT_S * 1000)}"
    return " ".join(o for o in (wait, given, "" if durable else "-c synchronous_commit=off") if o)


class BatchWriter:
    """Writes a projector's batches into ``schema``; see :class:`~projections.projector.Projector`
    for ``durable``, ``held_rows`` and ``share``. Not thread-safe: one projector drives it."""

    def __init__(
        self,
        settings: Settings,
        schema: str,
        *,
        durable: bool,
        held_rows: int,
        stop: threading.Event,
        share: Share | None = None,
    ) -> None:
        self.settings = settings
        self.schema = schema
        self.share = share
        self.durable = durable
        self.held_rows = held_rows
        self.stop = stop
        self.held: RowBuffer | None = RowBuffer() if held_rows > 0 else None
        self._conn: psycopg.Connection | None = None
        self._store: Store | None = None
        self._thread: ThreadPoolExecutor | None = None
        self.connecting = False
        """Whether :meth:`connect` is waiting for PostgreSQL (or migrating) now."""

    @property
    def connected(self) -> bool:
        return self._store is not None

    @property
    def lock_answered_at(self) -> float:
        """Monotonic time PostgreSQL last said another writer holds the schema's lock."""
        return -math.inf if self._store is None else self._store.lock_answered_at

    def connect(self) -> Offsets:
        """(Re)connect and migrate, retrying while PostgreSQL is unavailable (until
        :attr:`stop` is set); the stored offsets. :attr:`connecting` is true meanwhile."""
        self.connecting = True
        try:
            return self._connect()
        finally:
            self.connecting = False

    def _connect(self) -> Offsets:
        delay = 0.1
        while True:
            self.disconnect()
            try:
                return self._open()
            except (psycopg.OperationalError, psycopg.InterfaceError) as e:
                held = isinstance(e, psycopg.errors.LockNotAvailable)
                log.warning(
                    "PostgreSQL at %s %s (%s); retrying in %.1f s",
                    describe_dsn(self.settings.pg_dsn),
                    "waited too long for a table another session holds" if held else "unavailable",
                    one_line(e),
                    delay,
                )
            if self.stop.wait(delay):
                raise ProjectionError("stopped while waiting for PostgreSQL")
            delay = min(delay * 2, 5.0)

    def _open(self) -> Offsets:
        conn = psycopg.connect(
            self.settings.pg_dsn,
            connect_timeout=5,
            application_name=f"sluicegate-projector:{self.schema}"[:63],
            options=_options(self.settings.pg_dsn, durable=self.durable),
        )
        try:
            migrate(conn, self.schema, self.settings.topic_prefix)
            store = Store(conn, self.schema, self.share)
            positions = store.load_offsets()
        except psycopg.errors.LockNotAvailable as e:
            note_lock_holders(e, conn, self.schema)
            conn.close()
            raise
        except BaseException:
            conn.close()
            raise
        self._conn, self._store = conn, store
        return positions

    def disconnect(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()
        self._conn = None
        self._store = None

    def close(self) -> None:
        """Stop the helper thread (after the batch it writes) and disconnect."""
        if self._thread is not None:
            self._thread.shutdown(wait=True)
            self._thread = None
        self.disconnect()

    def stored_offsets(self, *, every_share: bool = False) -> Offsets:
        """The share's stored offsets (every share's with ``every_share``); only while no
        batch is being written."""
        assert self._store is not None
        return self._store.load_offsets(every_share=every_share)

    def claim_topics(self, ids: Mapping[str, str]) -> None:
        """Record the topics' ids, or refuse topics recreated since (``topic_ids.py``); only
        while no batch is being written."""
        assert self._conn is not None
        topic_ids.claim(self._conn, self.schema, ids)

    def submit(
        self, per_message: list[Mapped], advance: Offsets, expected: Offsets
    ) -> Future[tuple[Offsets, int]]:
        """Write one batch on the helper thread: its outcome is the positions after it and
        how many messages PostgreSQL refused (parked)."""
        if self._thread is None:
            self._thread = ThreadPoolExecutor(1, thread_name_prefix="projector-writer")
        return self._thread.submit(self._apply, per_message, advance, expected)

    def _apply(
        self, per_message: list[Mapped], advance: Offsets, expected: Offsets
    ) -> tuple[Offsets, int]:
        assert self._store is not None
        ops = [op for _, _, msg_ops, _ in per_message for op in msg_ops]
        try:
            self._store.write(ops, advance, expected, held=self.held, hold_up_to=self.held_rows)
        except (psycopg.DataError, psycopg.IntegrityError) as e:
            if self.held is not None:
                raise HeldRowsRefused(f"PostgreSQL refused rows held back: {e}") from e
            log.error("batch refused by PostgreSQL (%s); writing it message by message", e)
            return self._write_isolated(per_message, advance, dict(expected))
        except OffsetsMoved as e:
            if self.held is not None:
                raise self._moved_under_bulk_load() from e
            raise
        return {**expected, **advance}, 0

    def _moved_under_bulk_load(self) -> ProjectionError:
        """What stored offsets that moved under a bulk load are: re-seeking would write over
        another writer's rows in a schema only the load should write."""
        return ProjectionError(
            f"the stored offsets of {self.schema} moved while rows were held back: "
            "another writer is writing a schema only a bulk load should"
        )

    def _write_isolated(
        self, per_message: list[Mapped], advance: Offsets, positions: Offsets
    ) -> tuple[Offsets, int]:
        """Write a batch PostgreSQL refused, parking only the messages it refuses.

        Only data errors get here (a value PostgreSQL cannot store). The batch is halved,
        each half written in its own transaction, and a refused half halved again, down to
        single messages, which are parked: one bad message in a batch of n costs about
        2 log2(n) transactions, not n, and keeps the projector moving without dropping it.
        """
        half = len(per_message) // 2
        parked = 0
        for part in (per_message[:half], per_message[half:]):
            parked += self._write_part(part, positions)
        rest = {tp: o for tp, o in advance.items() if o > positions.get(tp, 0)}
        if rest:
            assert self._store is not None
            self._store.write([], rest, positions)
            positions.update(rest)
        return positions, parked

    def _write_part(self, part: list[Mapped], positions: Offsets) -> int:
        """Write consecutive messages of a batch in one transaction, or halve them; how many
        were parked. ``positions`` (what is stored) moves past them."""
        assert self._store is not None
        if not part:
            return 0
        step: Offsets = {}
        for tp, offset, _, _ in part:
            step[tp] = offset + 1
        try:
            self._store.write([op for _, _, ops, _ in part for op in ops], step, positions)
        except (psycopg.DataError, psycopg.IntegrityError) as e:
            if len(part) > 1:
                half = len(part) // 2
                return self._write_part(part[:half], positions) + self._write_part(
                    part[half:], positions
                )
            tp, offset, _, value = part[0]
            text = f"PostgreSQL refused the rows: {type(e).__name__}: {e}"
            log.error("parked %s[%d]@%d: %s", tp[0], tp[1], offset, text)
            self._store.write(park(Source(tp[0], tp[1], offset), value, text), step, positions)
            positions.update(step)
            return 1
        positions.update(step)
        return 0

    def flush_held(self, positions: Offsets) -> None:
        """Write the rows held back (on the caller's thread, no batch in flight), offsets
        ``positions`` unchanged. On a refused row :class:`HeldRowsRefused`; database errors
        propagate with the rows still held."""
        if self.held is None or not len(self.held):
            return
        assert self._store is not None
        try:
            self._store.flush(self.held, positions)
        except (psycopg.DataError, psycopg.IntegrityError) as e:
            raise HeldRowsRefused(f"PostgreSQL refused rows held back: {e}") from e
        except OffsetsMoved as e:
            raise self._moved_under_bulk_load() from e
