"""Row-by-row comparison of two projection schemas: what ``rebuild --verify`` reports."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from projections.model import META_TABLES, TABLES

DiffKind = Literal["changed", "only_live", "only_rebuilt"]


@dataclass(frozen=True)
class Difference:
    """One row that differs between two schemas, identified by its table and key."""

    table: str
    key: dict[str, Any]
    kind: DiffKind
    left: dict[str, Any] | None
    right: dict[str, Any] | None

    def describe(self, left_name: str = "live", right_name: str = "rebuilt") -> str:
        key = ", ".join(f"{k}={v!r}" for k, v in self.key.items())
        if self.kind == "only_live":
            return f"{self.table} ({key}): only in {left_name}: {_short(self.left)}"
        if self.kind == "only_rebuilt":
            return f"{self.table} ({key}): only in {right_name}: {_short(self.right)}"
        assert self.left is not None and self.right is not None
        changes = "; ".join(
            f"{c}: {left_name} {self.left[c]!r} != {right_name} {self.right[c]!r}"
            for c in self.left
            if self.left[c] != self.right.get(c)
        )
        return f"{self.table} ({key}): {changes}"


def _short(row: dict[str, Any] | None) -> str:
    text = repr(row)
    return text if len(text) <= 300 else text[:297] + "..."


def _tables() -> list[tuple[str, tuple[str, ...]]]:
    return [(spec.name, spec.key) for spec in TABLES] + list(META_TABLES)


def compare_schemas(conn: psycopg.Connection[Any], left: str, right: str) -> list[Difference]:
    """Every row that differs between the projection tables of ``left`` and ``right``.

    Compares whole rows (``EXCEPT ALL`` both ways) and pairs the leftovers by primary key:
    a key on both sides is ``changed``, otherwise ``only_live``/``only_rebuilt``.
    """
    differences: list[Difference] = []
    for table, key in _tables():
        left_only = _except(conn, left, right, table)
        right_only = _except(conn, right, left, table)
        right_by_key = {tuple(r[k] for k in key): r for r in right_only}
        for row in left_only:
            k = tuple(row[c] for c in key)
            other = right_by_key.pop(k, None)
            kind: DiffKind = "changed" if other is not None else "only_live"
            differences.append(Difference(table, dict(zip(key, k, strict=True)), kind, row, other))
        for k, row in right_by_key.items():
            differences.append(
                Difference(table, dict(zip(key, k, strict=True)), "only_rebuilt", None, row)
            )
    return differences


def _except(conn: psycopg.Connection[Any], a: str, b: str, table: str) -> list[dict[str, Any]]:
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(
            sql.SQL("SELECT * FROM {} EXCEPT ALL SELECT * FROM {}").format(
                sql.Identifier(a, table), sql.Identifier(b, table)
            )
        )
        return list(cur.fetchall())
