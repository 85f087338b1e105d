"""The PostgreSQL side of the projector: one batch of rows plus offsets in one transaction.

Bulk path per table: ``COPY`` the reduced rows into a session temp table (created once per
connection, ``ON COMMIT DELETE ROWS``), then one ``INSERT ... SELECT ... ON CONFLICT`` into
the real table with the table's policy. Counters are raised only by the rows that upsert
reports as inserted (``RETURNING``), so applying a batch twice cannot double a count.
``event_log`` (:data:`APPEND_ONLY`) is copied straight into its table: it holds one row per
source offset, and the offset check below admits each offset into one committed batch only.
So is the first write into a table found empty under the writers' lock (a fresh schema's):
with one row per key, nothing can conflict, and every row counts as inserted.

A ``"first"`` table's rows are nearly always new keys (an event names its own row), so they
are first copied straight into the table inside a savepoint; only when a key is already
stored (``UniqueViolation``) is the savepoint rolled back and the batch upserted as above,
with the first stored row winning. Either way the table ends the same; the straight copy
skips the temp table and the upsert's probe of every key. After a conflict the table is
upserted for the next :data:`UPSERT_AFTER_CONFLICT` batches, so a table whose keys repeat
does not pay for a failed copy each time. :attr:`Store.paths` counts how each batch went.

A writer may hold merged rows back in a :class:`~projections.model.RowBuffer` across batches
(``write(..., held=...)``) and write them once (:meth:`Store.flush`, or when the buffer
reaches its limit): the bulk load of a rebuild. The offsets a batch stores then run ahead of
the rows held back, so that is only for a schema nobody reads or resumes before the flush.

Rows are copied with the tables' column types declared (no per-value type lookup) and
without the per-value NUL scrub; a batch whose text holds a NUL (PostgreSQL text cannot)
fails on the client before anything reaches the table, and is then written again with every
value passed through :func:`~projections.model.storable`, so the stored rows are the same.

Writers of one schema serialize on a transaction-level advisory lock, and each batch first
checks that the stored offsets are those the writer last saw (:class:`OffsetsMoved` if not),
so a rebuild swapping its schema in, or a second projector, can never interleave rows. A
writer given a :class:`~projections.share.Share` (a worker of a parallel rebuild, a live
projector with ``--share``) reads, checks and stores the offsets of its share's partitions
only, so the writers of the shares write one schema side by side. A batch waits for the lock
half a second at a time while another writer holds it, so its wait shows as answers
(:attr:`Store.lock_answered_at`), not as silence. A table another session holds is waited
for as long as the session's ``lock_timeout`` allows (``batch_writer.TABLE_LOCK_WAIT_S``):
the batch then fails with ``LockNotAvailable``, with a note naming the sessions that hold
the schema's tables.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from operator import itemgetter

import psycopg
from psycopg import sql

from projections.db import lock_key, note_lock_holders
from projections.errors import OffsetsMoved
from projections.model import (
    TABLES,
    CounterKey,
    Row,
    RowBuffer,
    RowOp,
    TableSpec,
    reduce_rows,
    storable,
)
from projections.share import Share

log = logging.getLogger("sluicegate.projector")

Offsets = dict[tuple[str, int], int]

APPEND_ONLY = frozenset({"event_log"})
"""Tables keyed by the source position alone: written with a plain ``COPY``, no upsert."""

UPSERT_AFTER_CONFLICT = 16
"""Batches a ``"first"`` table is upserted for after a straight copy into it conflicted."""

LOCK_ASKED_EVERY_S = 0.5
"""How long a batch waits for the writers' lock another writer holds before it says so."""
SAY_WAITING_EVERY_S = 60.0
_WAIT_FOR_LOCK = sql.SQL("SET LOCAL lock_timeout = {}").format(
    sql.Literal(f"{round(LOCK_ASKED_EVERY_S * 1000)}ms")
)


def _tmp(spec: TableSpec) -> sql.Identifier:
    return sql.Identifier(f"_sg_tmp_{spec.name}")


@dataclass(frozen=True)
class _Plan:
    """How one table's rows are written: statements and column types, prepared once."""

    spec: TableSpec
    values: Callable[[Row], tuple[object, ...]]
    types: list[str]
    copy: sql.Composed
    upsert: sql.Composed | None
    fill: sql.Composed
    """``COPY`` straight into the table: for a table known to be empty."""


_JSON = frozenset({"json", "jsonb"})


def column_types(conn: psycopg.Connection, schema: str) -> dict[str, list[str]]:
    """``{table: [type of each column of its TableSpec, in spec order]}`` as PostgreSQL
    names them (``text``, ``bigint[]``, ``jsonb``...)."""
    rows = conn.execute(
        "SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod) "
        "FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND a.attnum > 0 AND NOT a.attisdropped",
        (schema,),
    ).fetchall()
    by_table: dict[str, dict[str, str]] = {}
    for table, column, kind in rows:
        # JSON columns take their text as it is (their dumper would encode it again).
        by_table.setdefault(str(table), {})[str(column)] = "text" if kind in _JSON else str(kind)
    return {spec.name: [by_table[spec.name][c] for c in spec.columns] for spec in TABLES}


class Store:
    """Writes batches into ``schema`` over ``conn`` (a non-autocommit connection it owns)."""

    def __init__(self, conn: psycopg.Connection, schema: str, share: Share | None = None) -> None:
        self.conn = conn
        self.schema = schema
        self.share = share
        """Only these partitions' offsets are read, checked and stored (all when None)."""
        self._lock = lock_key(schema)
        with conn.transaction():
            for spec in TABLES:
                if spec.name not in APPEND_ONLY:
                    conn.execute(
                        sql.SQL(
                            "CREATE TEMP TABLE IF NOT EXISTS {} (LIKE {}) ON COMMIT DELETE ROWS"
                        ).format(_tmp(spec), sql.Identifier(schema, spec.name))
                    )
            types = column_types(conn, schema)
        self._plans = {spec.name: self._plan(spec, types[spec.name]) for spec in TABLES}
        self._maybe_empty = {spec.name for spec in TABLES if spec.name not in APPEND_ONLY}
        """Tables not yet seen holding rows: checked under the lock before they are written."""
        self._upsert_for: dict[str, int] = {}
        """``"first"`` tables upserted without a straight copy first: batches still to go."""
        self.lock_answered_at = -math.inf
        """Monotonic time PostgreSQL last said the writers' lock is held by another."""
        self.paths: Counter[tuple[str, str]] = Counter()
        """``(table, path)`` batches written: ``"empty"`` (into an empty table), ``"straight"``
        (a ``"first"`` table, no key stored before), ``"conflict"`` (a straight copy met a
        stored key and was undone), ``"upsert"``; for profiles and tests."""

    def _plan(self, spec: TableSpec, types: list[str]) -> _Plan:
        cols = sql.SQL(", ").join(sql.Identifier(c) for c in spec.columns)
        direct = spec.name in APPEND_ONLY
        into = sql.Identifier(self.schema, spec.name) if direct else _tmp(spec)
        return _Plan(
            spec=spec,
            values=itemgetter(*spec.columns),
            types=types,
            copy=sql.SQL("COPY {} ({}) FROM STDIN").format(into, cols),
            upsert=None if direct else self._upsert_sql(spec),
            fill=sql.SQL("COPY {} ({}) FROM STDIN").format(
                sql.Identifier(self.schema, spec.name), cols
            ),
        )

    def _upsert_sql(self, spec: TableSpec) -> sql.Composed:
        cols = sql.SQL(", ").join(sql.Identifier(c) for c in spec.columns)
        key = sql.SQL(", ").join(sql.Identifier(c) for c in spec.key)
        target = sql.Identifier(self.schema, spec.name)
        insert = sql.SQL("INSERT INTO {t} AS t ({cols}) SELECT {cols} FROM {tmp} ").format(
            t=target, cols=cols, tmp=_tmp(spec)
        )
        if spec.policy == "first":
            if spec.counters is None:
                return insert + sql.SQL("ON CONFLICT ({key}) DO NOTHING").format(key=key)
            returning = sql.SQL(", ").join(sql.Identifier(c) for c in spec.key)
            return insert + sql.SQL("ON CONFLICT ({key}) DO NOTHING RETURNING {ret}").format(
                key=key, ret=returning
            )
        updates = sql.SQL(", ").join(
            sql.SQL("{c} = EXCLUDED.{c}").format(c=sql.Identifier(c))
            for c in spec.columns
            if c not in spec.key
        )
        return insert + sql.SQL(
            "ON CONFLICT ({key}) DO UPDATE SET {updates} WHERE t.rank < EXCLUDED.rank"
        ).format(key=key, updates=updates)

    def load_offsets(self, *, every_share: bool = False) -> Offsets:
        """The stored next offsets of the share's partitions, or of ``every_share``'s
        (committed state; call outside a transaction)."""
        with self.conn.transaction():
            return self._read_offsets(every_share=every_share)

    def _read_offsets(self, *, every_share: bool = False) -> Offsets:
        rows = self.conn.execute(
            sql.SQL("SELECT topic, partition, next_offset FROM {}").format(
                sql.Identifier(self.schema, "offsets")
            )
        ).fetchall()
        found = {(str(t), int(p)): int(o) for t, p, o in rows}
        if self.share is None or every_share:
            return found
        return {tp: o for tp, o in found.items() if tp in self.share}

    def write(
        self,
        ops: Iterable[RowOp],
        offsets: Mapping[tuple[str, int], int],
        expected: Mapping[tuple[str, int], int],
        *,
        held: RowBuffer | None = None,
        hold_up_to: int = 0,
    ) -> None:
        """Apply one batch and advance ``offsets`` atomically, if nobody else moved them.

        ``expected`` is what the caller believes is stored; when the stored offsets differ,
        nothing is written and :class:`OffsetsMoved` is raised. Database errors propagate
        after the transaction rolled back.

        With ``held``, the batch's merged rows join the buffer instead, and the buffer is
        written with this batch only once it holds more than ``hold_up_to`` rows; when the
        transaction fails, the buffer holds what it held before, plus the batch's rows.
        """
        appended: dict[str, list[Row]] = {}
        merged: list[RowOp] = []
        for op in ops:
            if op[0] in APPEND_ONLY:
                appended.setdefault(op[0], []).append(op[1])
            else:
                merged.append(op)
        if held is None:
            self._write({**appended, **reduce_rows(merged)}, offsets, expected)
            return
        held.merge(merged)
        taken = held.take() if len(held) > hold_up_to else {}
        try:
            self._write({**appended, **taken}, offsets, expected)
        except BaseException:
            held.restore(taken)
            raise

    def flush(self, held: RowBuffer, expected: Mapping[tuple[str, int], int]) -> None:
        """Write the rows ``held`` back (offsets unchanged); on failure they stay held."""
        if not len(held):
            return
        taken = held.take()
        try:
            self._write(taken, {}, expected)
        except BaseException:
            held.restore(taken)
            raise

    def _write(
        self,
        tables: Mapping[str, list[Row]],
        offsets: Mapping[tuple[str, int], int],
        expected: Mapping[tuple[str, int], int],
    ) -> None:
        try:
            try:
                self._transaction(tables, offsets, expected, scrub=False)
            except psycopg.DataError:
                # Most likely a NUL in some text; the retry scrubs every value (and re-raises
                # when the data is wrong in another way).
                self._transaction(tables, offsets, expected, scrub=True)
        except psycopg.errors.LockNotAvailable as e:
            note_lock_holders(e, self.conn, self.schema)
            raise

    def _transaction(
        self,
        tables: Mapping[str, list[Row]],
        offsets: Mapping[tuple[str, int], int],
        expected: Mapping[tuple[str, int], int],
        *,
        scrub: bool,
    ) -> None:
        with self.conn.transaction():
            self._lock_writers()
            stored = self._read_offsets()
            if stored != dict(expected):
                raise OffsetsMoved(f"stored offsets of {self.schema} moved under this writer")
            empty = self._empty_of(tables)
            counts: Counter[CounterKey] = Counter()
            for name, rows in tables.items():
                plan = self._plans[name]
                inserted = self._copy(plan, rows, scrub, empty=name in empty)
                if plan.spec.counters is not None:
                    for row in inserted:
                        counts.update(plan.spec.counters(row))
            if counts:
                self._add_counters(counts)
            if offsets:
                self._store_offsets(offsets)
        self._maybe_empty.difference_update(tables)

    def _lock_writers(self) -> None:
        """Take the writers' lock (until the transaction ends). While another writer holds it
        (a rebuild's swap or ``--verify``, a second projector, another worker of a parallel
        rebuild), wait for it :data:`LOCK_ASKED_EVERY_S` at a time: each answer
        (:attr:`lock_answered_at`) shows the batch waits for the lock, not for a connection
        that stopped answering, and the lock is taken as soon as it is free."""
        row = self.conn.execute("SELECT pg_try_advisory_xact_lock(%s)", (self._lock,)).fetchone()
        if row is not None and row[0]:
            return
        began = said = time.monotonic()
        while True:
            try:
                # A savepoint: a wait that timed out undoes itself alone.
                with self.conn.transaction():
                    self.conn.execute(_WAIT_FOR_LOCK)
                    self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock,))
                    # Back to the session's own limit on the tables' locks (batch_writer.py).
                    self.conn.execute("SET LOCAL lock_timeout = DEFAULT")
                return
            except psycopg.errors.LockNotAvailable:
                pass
            self.lock_answered_at = now = time.monotonic()
            if now - said >= SAY_WAITING_EVERY_S:
                said = now
                log.warning(
                    "a batch has waited %.0f s for the writers' lock of %s: another writer "
                    "holds it (`projections rebuild` verifying or swapping, or a second "
                    "projector)",
                    now - began,
                    self.schema,
                )

    def _empty_of(self, tables: Iterable[str]) -> set[str]:
        """Which of ``tables`` hold no rows (asked only of those not yet seen holding any)."""
        ask = [name for name in tables if name in self._maybe_empty]
        if not ask:
            return set()
        found = self.conn.execute(
            sql.SQL(" UNION ALL ").join(
                sql.SQL("SELECT {} WHERE NOT EXISTS (SELECT 1 FROM {})").format(
                    sql.Literal(name), sql.Identifier(self.schema, name)
                )
                for name in ask
            )
        ).fetchall()
        empty = {str(row[0]) for row in found}
        self._maybe_empty.difference_update(set(ask) - empty)
        return empty

    def _copy(self, plan: _Plan, rows: list[Row], scrub: bool, *, empty: bool) -> list[Row]:
        """Write ``rows`` (one per key; straight into the table when it is ``empty``); the
        inserted ones of a counted table (for its counters)."""
        values = [plan.values(row) for row in rows]
        if scrub:
            values = [tuple(storable(v) for v in value) for value in values]
        spec = plan.spec
        if not empty and self._straight_first(plan, values):
            return _all_inserted(spec, rows, values, scrub)
        cur = self.conn.cursor()
        with cur.copy(plan.fill if empty else plan.copy) as copy:
            copy.set_types(plan.types)
            for value in values:
                copy.write_row(value)
        if plan.upsert is None:
            return []
        self.paths[spec.name, "empty" if empty else "upsert"] += 1
        if empty:
            return _all_inserted(spec, rows, values, scrub)
        cur.execute(plan.upsert)
        if spec.policy != "first" or spec.counters is None:
            return []
        key_at = [spec.columns.index(c) for c in spec.key]
        by_key = {tuple(_keyable(v[i]) for i in key_at): v for v in values}
        inserted = [by_key[tuple(_keyable(k) for k in ret)] for ret in cur.fetchall()]
        return [dict(zip(spec.columns, v, strict=True)) for v in inserted]

    def _straight_first(self, plan: _Plan, values: list[tuple[object, ...]]) -> bool:
        """Copy a ``"first"`` table's ``values`` straight into it; False (nothing written) when
        one's key is already stored, or the table is upserted for now."""
        name = plan.spec.name
        if plan.upsert is None or plan.spec.policy != "first":
            return False
        waiting = self._upsert_for.get(name, 0)
        if waiting:
            self._upsert_for[name] = waiting - 1
            return False
        try:
            # A savepoint: a stored key undoes this copy alone.
            with self.conn.transaction(), self.conn.cursor().copy(plan.fill) as copy:
                copy.set_types(plan.types)
                for value in values:
                    copy.write_row(value)
        except psycopg.errors.UniqueViolation:
            self._upsert_for[name] = UPSERT_AFTER_CONFLICT
            self.paths[name, "conflict"] += 1
            return False
        self.paths[name, "straight"] += 1
        return True

    def _add_counters(self, counts: Counter[CounterKey]) -> None:
        names = [k[0] for k in counts]
        labels = [k[1] for k in counts]
        values = [counts[k] for k in counts]
        self.conn.execute(
            sql.SQL(
                "INSERT INTO {t} AS t (name, label, value) "
                "SELECT * FROM unnest(%s::text[], %s::text[], %s::bigint[]) "
                "ON CONFLICT (name, label) DO UPDATE SET value = t.value + EXCLUDED.value"
            ).format(t=sql.Identifier(self.schema, "counters")),
            (names, labels, values),
        )

    def _store_offsets(self, offsets: Mapping[tuple[str, int], int]) -> None:
        self.conn.execute(
            sql.SQL(
                "INSERT INTO {t} AS t (topic, partition, next_offset) "
                "SELECT * FROM unnest(%s::text[], %s::int[], %s::bigint[]) "
                "ON CONFLICT (topic, partition) DO UPDATE SET next_offset = EXCLUDED.next_offset"
            ).format(t=sql.Identifier(self.schema, "offsets")),
            ([k[0] for k in offsets], [k[1] for k in offsets], list(offsets.values())),
        )


def _all_inserted(
    spec: TableSpec, rows: list[Row], values: list[tuple[object, ...]], scrub: bool
) -> list[Row]:
    """What :meth:`Store._copy` returns when every row was inserted: the rows of a counted
    table, scrubbed ones by their stored values."""
    if spec.counters is None:
        return []
    if not scrub:
        return rows
    return [dict(zip(spec.columns, v, strict=True)) for v in values]


def _keyable(value: object) -> object:
    return tuple(value) if isinstance(value, list) else value
