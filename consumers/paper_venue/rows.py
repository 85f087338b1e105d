"""The rows of the paper venue's state, and their conversion to and from SQLite values.

Amounts are stored as decimal strings and read back as :class:`~decimal.Decimal`, never float.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import astuple, dataclass, fields
from decimal import Decimal
from typing import Any, TypeVar

OPEN_STATUSES = ("NEW", "PARTIALLY_FILLED")
R = TypeVar("R")


@dataclass
class OrderRow:
    """One order as stored. ``price`` is 0 for MARKET orders, ``orig_quote_qty`` 0 unless the
    order was placed with ``quoteOrderQty``. ``visible_from_ms`` is when queries may see it."""

    order_id: int
    account: str
    symbol: str
    client_order_id: str
    side: str
    type: str
    time_in_force: str
    price: Decimal
    orig_qty: Decimal
    orig_quote_qty: Decimal
    executed_qty: Decimal
    cumm_quote_qty: Decimal
    status: str
    time_ms: int
    update_time_ms: int
    visible_from_ms: int
    api: str

    @property
    def is_open(self) -> bool:
        return self.status in OPEN_STATUSES


@dataclass(frozen=True)
class TradeRow:
    """One fill of one order."""

    trade_id: int
    order_id: int
    account: str
    symbol: str
    side: str
    price: Decimal
    qty: Decimal
    quote_qty: Decimal
    commission: Decimal
    commission_asset: str
    is_maker: bool
    time_ms: int


@dataclass(frozen=True)
class FaultRow:
    """A stored fault rule with its counters (see :mod:`consumers.paper_venue.faults`)."""

    fault_id: int
    name: str
    spec: str
    matched: int
    applied: int
    created_ms: int


def columns(kind: type[Any]) -> str:
    """The SQL column list of a row type, in field order."""
    return ", ".join(f.name for f in fields(kind))


def to_sql(row: Any) -> tuple[object, ...]:
    """A row's values for SQLite: decimals as strings, booleans as integers."""
    return tuple(
        str(v) if isinstance(v, Decimal) else int(v) if isinstance(v, bool) else v
        for v in astuple(row)
    )


def _same(value: Any) -> Any:
    return value


_CONVERT: dict[str, Callable[[Any], Any]] = {"Decimal": Decimal, "bool": bool}
_CONVERTERS: dict[type[Any], tuple[Callable[[Any], Any], ...]] = {}


def from_sql(kind: type[R], values: tuple[Any, ...]) -> R:
    """A row of ``kind`` from SQLite values (in :func:`columns` order)."""
    converters = _CONVERTERS.get(kind)
    if converters is None:
        converters = tuple(_CONVERT.get(str(f.type), _same) for f in fields(kind))  # type: ignore[arg-type]
        _CONVERTERS[kind] = converters
    return kind(*(convert(v) for convert, v in zip(converters, values, strict=True)))
