"""Decimal arithmetic of the paper venue: parsing, formatting, lot steps and fills.

Money is never a float here. Products and sums of prices and quantities are computed in a
context that traps ``Inexact``, so a fill that cannot be represented exactly raises instead of
being rounded silently. The only rounding is explicit: quantities bought with a quote amount are
floored to the lot step, and commissions are rounded half-up to :data:`COMMISSION_PLACES`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import (
    ROUND_DOWN,
    ROUND_HALF_UP,
    Context,
    Decimal,
    DivisionByZero,
    Inexact,
    InvalidOperation,
    Overflow,
)

# Binance's pattern for a DECIMAL parameter.
DECIMAL_PATTERN = r"^([0-9]{1,20})(\.[0-9]{1,20})?$"
_DECIMAL_RE = re.compile(DECIMAL_PATTERN)
WHOLE_PATTERN = "^[0-9]{1,20}$"
_WHOLE_RE = re.compile(WHOLE_PATTERN)
MAX_INTEGER = 2**63 - 1
"""The largest INTEGER SQLite stores: every id (orders, trades, faults) fits below it."""

COMMISSION_PLACES = 8
_COMMISSION_QUANTUM = Decimal(1).scaleb(-COMMISSION_PLACES)
ZERO = Decimal(0)

# Enough digits for 20 integer digits times 20 fractional digits; anything inexact is a bug.
EXACT = Context(prec=80, traps=[InvalidOperation, DivisionByZero, Overflow, Inexact])
_DIVIDE = Context(prec=80, traps=[InvalidOperation, DivisionByZero, Overflow])


def parse_decimal(text: str) -> Decimal | None:
    """The value of a non-negative decimal literal in Binance's format, or None if malformed
    (a trailing newline too: ``$`` alone would let ``"1.5\\n"`` through)."""
    if not _DECIMAL_RE.fullmatch(text):
        return None
    return Decimal(text)


def parse_whole(text: str, maximum: int = MAX_INTEGER) -> int | None:
    """The value of ``text`` if it is 1 to 20 ASCII digits worth at most ``maximum`` (by
    default the largest id SQLite stores), else None.

    Not ``str.isdigit``: it accepts superscripts such as ``"²"``, which ``int`` refuses, and
    it bounds nothing, so an id past SQLite's INTEGER failed the query (a 500, not a 400).
    """
    if not _WHOLE_RE.fullmatch(text):
        return None
    value = int(text)
    return value if value <= maximum else None


def fmt(value: Decimal) -> str:
    """A fixed-point string with at least 8 decimals, as Binance writes amounts (never 1E-8)."""
    text = format(value, "f")
    whole, _, frac = text.partition(".")
    return f"{whole}.{frac.ljust(8, '0')}"


def mul(a: Decimal, b: Decimal) -> Decimal:
    """``a * b`` exactly (raises ``Inexact`` rather than round)."""
    return EXACT.multiply(a, b)


def add(a: Decimal, b: Decimal) -> Decimal:
    """``a + b`` exactly."""
    return EXACT.add(a, b)


def sub(a: Decimal, b: Decimal) -> Decimal:
    """``a - b`` exactly."""
    return EXACT.subtract(a, b)


def neg(a: Decimal) -> Decimal:
    """``-a`` exactly (unary minus would round to the thread's default context)."""
    return EXACT.minus(a)


def is_multiple(value: Decimal, step: Decimal) -> bool:
    """Whether ``value`` is a whole number of ``step``s."""
    return EXACT.remainder(value, step) == 0


def floor_to_step(value: Decimal, step: Decimal) -> Decimal:
    """The largest whole number of ``step``s not above ``value`` (value >= 0)."""
    steps = _DIVIDE.divide(value, step).to_integral_value(rounding=ROUND_DOWN)
    return mul(steps, step)


def quantity_for_quote(quote_amount: Decimal, price: Decimal, step: Decimal) -> Decimal:
    """Base quantity a MARKET order with ``quoteOrderQty`` trades: floored to the lot step.

    The notional traded is therefore never above the quote amount asked for.
    """
    return floor_to_step(_DIVIDE.divide(quote_amount, price), step)


def commission_on(amount: Decimal, rate: Decimal) -> Decimal:
    """Commission on ``amount`` at ``rate``, rounded half-up to 8 decimals."""
    return mul(amount, rate).quantize(_COMMISSION_QUANTUM, rounding=ROUND_HALF_UP)


@dataclass(frozen=True)
class FillEffect:
    """What one fill does to the account, in both assets (positive = credited).

    A buyer pays ``price * qty`` in the quote asset and receives ``qty`` minus commission in
    the base asset; a seller gives ``qty`` and receives ``price * qty`` minus commission in the
    quote asset. Commission is always charged in the asset received, as on Binance without BNB.
    """

    base_change: Decimal
    quote_change: Decimal
    quote_quantity: Decimal
    commission: Decimal
    commission_in_base: bool


def fill_effect(side: str, price: Decimal, qty: Decimal, rate: Decimal) -> FillEffect:
    """The balance effect of filling ``qty`` at ``price`` on ``side`` (``BUY``/``SELL``)."""
    notional = mul(price, qty)
    if side == "BUY":
        commission = commission_on(qty, rate)
        return FillEffect(sub(qty, commission), neg(notional), notional, commission, True)
    commission = commission_on(notional, rate)
    return FillEffect(neg(qty), sub(notional, commission), notional, commission, False)


def reserve_for(side: str, limit_price: Decimal, qty: Decimal) -> Decimal:
    """What a resting order locks: the quote notional for a buy, the quantity for a sell."""
    return mul(limit_price, qty) if side == "BUY" else qty
