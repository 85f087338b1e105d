"""One projected table's shape and merge policy (:class:`TableSpec`), and the row types.

See :mod:`projections.model` for the policies and the tables.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

Row = dict[str, object]
RowOp = tuple[str, Row]
CounterKey = tuple[str, str]
Policy = Literal["first", "max"]


@dataclass(frozen=True)
class TableSpec:
    """One projected table: its columns (as created by the migrations), key and policy.

    ``counters(row)`` names the ``(counter, label)`` pairs one inserted row adds 1 to; only
    ``"first"`` tables count, because only their inserts are unambiguous events.
    """

    name: str
    columns: tuple[str, ...]
    key: tuple[str, ...]
    policy: Policy = "first"
    counters: Callable[[Row], Sequence[CounterKey]] | None = None

    def key_of(self, row: Row) -> tuple[object, ...]:
        return tuple(row[c] for c in self.key)

    @property
    def rank_index(self) -> int:
        return self.columns.index("rank")
