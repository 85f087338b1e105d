"""The read model as Python dicts, with exactly the store's merge rules (``projections.model``).

Used by the property tests as "the projection" and by the integration tests as the expected
content of the PostgreSQL tables.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from projections.model import (
    TABLES_BY_NAME,
    CounterKey,
    Row,
    RowOp,
    rank_of,
    reduce_rows,
    storable,
)


@dataclass
class MemoryProjection:
    """The read model as Python dicts, with exactly the store's merge rules.

    Used by the property tests as "the projection" and by the integration tests as the
    expected content of the PostgreSQL tables.
    """

    tables: dict[str, dict[tuple[object, ...], Row]] = field(default_factory=dict)
    counters: Counter[CounterKey] = field(default_factory=Counter)
    offsets: dict[tuple[str, int], int] = field(default_factory=dict)

    def apply(self, ops: Iterable[RowOp], offsets: Mapping[tuple[str, int], int] = {}) -> None:
        """Apply one batch (as the store does in one transaction)."""
        for table, rows in reduce_rows(ops).items():
            spec = TABLES_BY_NAME[table]
            stored = self.tables.setdefault(table, {})
            for raw in rows:
                row = {c: storable(v) for c, v in raw.items()}
                key = spec.key_of(row)
                current = stored.get(key)
                if current is None:
                    stored[key] = row
                    if spec.counters is not None:
                        self.counters.update(spec.counters(row))
                elif spec.policy == "max" and rank_of(row) > rank_of(current):
                    stored[key] = row
        self.offsets.update(offsets)

    def rows(self, table: str) -> list[Row]:
        """The rows of ``table`` sorted by key, with array values as lists."""
        spec = TABLES_BY_NAME[table]
        result = []
        for key in sorted(self.tables.get(table, {}), key=_sort_key):
            row = self.tables[table][key]
            result.append({c: _listify(row.get(c)) for c in spec.columns})
        return result


def _listify(value: object) -> object:
    return list(value) if isinstance(value, tuple) else value


def _sort_key(key: tuple[object, ...]) -> tuple[tuple[int, str], ...]:
    return tuple(
        (0, "") if v is None else (1, f"{v:020d}" if isinstance(v, int) else str(v)) for v in key
    )
