"""The PostgreSQL side of the projector: one batch of rows plus offsets in one transaction.

Bulk path per table: ``COPY`` the reduced rows into a session temp table (created once per
connection, ``ON COMMIT DELETE ROWS``), then one ``INSERT ... SELECT ... ON CONFLICT`` into
the real table with the table's policy. Counters are raised only by the rows that upsert
reports as inserted (``RETURNING``), so applying a batch twice cannot double a count.

Writers of one schema serialize on a transaction-level advisory lock, and each batch first
checks that the stored offsets are those the writer last saw (:class:`OffsetsMoved` if not),
so a rebuild swapping its schema in, or a second projector, can never interleave rows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

import psycopg
from psycopg import sql

from projections.db import lock_key
from projections.errors import OffsetsMoved
from projections.model import (
    TABLES,
    TABLES_BY_NAME,
    CounterKey,
    Row,
    RowOp,
    TableSpec,
    reduce_rows,
    storable,
)

Offsets = dict[tuple[str, int], int]


def _tmp(spec: TableSpec) -> sql.Identifier:
    return sql.Identifier(f"_sg_tmp_{spec.name}")


class Store:
    """Writes batches into ``schema`` over ``conn`` (a non-autocommit connection it owns)."""

    def __init__(self, conn: psycopg.Connection, schema: str) -> None:
        self.conn = conn
        self.schema = schema
        self._lock = lock_key(schema)
        self._statements = {spec.name: self._upsert_sql(spec) for spec in TABLES}
        with conn.transaction():
            for spec in TABLES:
                conn.execute(
                    sql.SQL(
                        "CREATE TEMP TABLE IF NOT EXISTS {} (LIKE {}) ON COMMIT DELETE ROWS"
                    ).format(_tmp(spec), sql.Identifier(schema, spec.name))
                )

    def _upsert_sql(self, spec: TableSpec) -> sql.Composed:
        cols = sql.SQL(", ").join(sql.Identifier(c) for c in spec.columns)
        key = sql.SQL(", ").join(sql.Identifier(c) for c in spec.key)
        target = sql.Identifier(self.schema, spec.name)
        insert = sql.SQL("INSERT INTO {t} AS t ({cols}) SELECT {cols} FROM {tmp} ").format(
            t=target, cols=cols, tmp=_tmp(spec)
        )
        if spec.policy == "first":
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

    def load_offsets(self) -> Offsets:
        """The stored next offsets (committed state; call outside a transaction)."""
        with self.conn.transaction():
            return self._read_offsets()

    def _read_offsets(self) -> Offsets:
        rows = self.conn.execute(
            sql.SQL("SELECT topic, partition, next_offset FROM {}").format(
                sql.Identifier(self.schema, "offsets")
            )
        ).fetchall()
        return {(str(t), int(p)): int(o) for t, p, o in rows}

    def write(
        self,
        ops: Iterable[RowOp],
        offsets: Mapping[tuple[str, int], int],
        expected: Mapping[tuple[str, int], int],
    ) -> None:
        """Apply one batch and advance ``offsets`` atomically, if nobody else moved them.

        ``expected`` is what the caller believes is stored; when the stored offsets differ,
        nothing is written and :class:`OffsetsMoved` is raised. Database errors propagate
        after the transaction rolled back.
        """
        reduced = reduce_rows(ops)
        with self.conn.transaction():
            self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock,))
            stored = self._read_offsets()
            if stored != dict(expected):
                raise OffsetsMoved(f"stored offsets of {self.schema} moved under this writer")
            counts: Counter[CounterKey] = Counter()
            for name, rows in reduced.items():
                spec = TABLES_BY_NAME[name]
                inserted = self._upsert(spec, rows)
                if spec.counters is not None:
                    for row in inserted:
                        counts.update(spec.counters(row))
            if counts:
                self._add_counters(counts)
            if offsets:
                self._store_offsets(offsets)

    def _upsert(self, spec: TableSpec, rows: list[Row]) -> list[Row]:
        cur = self.conn.cursor()
        cols = sql.SQL(", ").join(sql.Identifier(c) for c in spec.columns)
        values = [[storable(row[c]) for c in spec.columns] for row in rows]
        with cur.copy(sql.SQL("COPY {} ({}) FROM STDIN").format(_tmp(spec), cols)) as copy:
            for value in values:
                copy.write_row(value)
        cur.execute(self._statements[spec.name])
        if spec.policy != "first" or spec.counters is None:
            return []
        key_at = [spec.columns.index(c) for c in spec.key]
        by_key = {tuple(_keyable(v[i]) for i in key_at): v for v in values}
        inserted = [by_key[tuple(_keyable(k) for k in ret)] for ret in cur.fetchall()]
        return [dict(zip(spec.columns, v, strict=True)) for v in inserted]

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


def _keyable(value: object) -> object:
    return tuple(value) if isinstance(value, list) else value
