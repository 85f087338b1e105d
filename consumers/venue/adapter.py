"""The venue adapter interface: what the execution gateway may ask a venue, and every answer.

Every call returns a typed answer instead of raising, and every answer says how much it proves:

- :class:`Accepted` — the venue has the order; its status, executed quantity and (when the venue
  said) its fills. ``status`` FILLED is the "Filled" answer.
- :class:`Rejected` — the venue refused *this request*: it was definitely not performed (an
  order not placed, a cancel not done). Its ``reason`` says why; ``DUPLICATE_CLIENT_ORDER_ID``
  means an OPEN order with that client id already exists (query it).
- :class:`NotFound` — the venue says it has no such order (for a query), or no such OPEN order
  (for a cancel: never placed, or already finished). A venue may not see an order it accepted
  for a while, so after an unknown placement this is evidence only after the venue's quiet
  period.
- :class:`Unknown` — the outcome may or may not exist: timeout, dropped connection, 5xx,
  "execution status unknown", an answer that could not be read, or a query the venue refused
  (which proves nothing about the order). Never treat an Unknown as a Rejected: reconcile it by
  client order id.

Requests carry the attempt's time (:class:`Attempt`): the venue refuses a request older than its
window, so a request from a paused or fenced process is refused by the venue itself.
Amounts are :class:`~decimal.Decimal`, never float. An adapter reads them with :func:`amount`
and times with :func:`epoch_ms`, and answers ``Unknown`` (unreadable) for anything else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from enum import StrEnum
from typing import Protocol


class Side(StrEnum):
    BUY = "BUY"
    SELL = "SELL"


class OrderType(StrEnum):
    """Adapters place MARKET and LIMIT orders; the others may appear in answers (an account
    can hold orders placed by other tools)."""

    MARKET = "MARKET"
    LIMIT = "LIMIT"
    LIMIT_MAKER = "LIMIT_MAKER"
    STOP_LOSS = "STOP_LOSS"
    STOP_LOSS_LIMIT = "STOP_LOSS_LIMIT"
    TAKE_PROFIT = "TAKE_PROFIT"
    TAKE_PROFIT_LIMIT = "TAKE_PROFIT_LIMIT"


class TimeInForce(StrEnum):
    GTC = "GTC"
    IOC = "IOC"
    FOK = "FOK"


class OrderStatus(StrEnum):
    """Binance's order statuses; NEW and PARTIALLY_FILLED (and PENDING_NEW) are open."""

    PENDING_NEW = "PENDING_NEW"
    NEW = "NEW"
    PARTIALLY_FILLED = "PARTIALLY_FILLED"
    FILLED = "FILLED"
    PENDING_CANCEL = "PENDING_CANCEL"
    CANCELED = "CANCELED"
    REJECTED = "REJECTED"
    EXPIRED = "EXPIRED"
    EXPIRED_IN_MATCH = "EXPIRED_IN_MATCH"

    @property
    def is_open(self) -> bool:
        return self in (OrderStatus.PENDING_NEW, OrderStatus.NEW, OrderStatus.PARTIALLY_FILLED)


@dataclass(frozen=True)
class Attempt:
    """When a request was decided and how long the venue may accept it.

    ``sent_at_ms`` becomes Binance's ``timestamp`` and ``window_ms`` its ``recvWindow`` (at most
    60000). Pass the attempt's recorded time: a request that leaves later than the window is
    refused (``Rejected`` with ``OUTSIDE_RECV_WINDOW``), never placed.
    """

    sent_at_ms: int
    window_ms: int = 5000

    def __post_init__(self) -> None:
        if not 0 < self.window_ms <= 60000:
            raise ValueError(f"window_ms must be in 1..60000, not {self.window_ms}")


@dataclass(frozen=True)
class OrderRequest:
    """A new order. MARKET takes ``quantity`` or ``quote_quantity``; LIMIT takes ``quantity``,
    ``price`` and ``time_in_force`` (GTC when omitted)."""

    symbol: str
    side: Side
    type: OrderType
    client_order_id: str
    quantity: Decimal | None = None
    quote_quantity: Decimal | None = None
    price: Decimal | None = None
    time_in_force: TimeInForce | None = None

    def __post_init__(self) -> None:
        if self.type is OrderType.LIMIT:
            if self.quantity is None or self.price is None or self.quote_quantity is not None:
                raise ValueError("a LIMIT order takes quantity and price (not quote_quantity)")
        elif self.type is OrderType.MARKET:
            if (self.quantity is None) == (self.quote_quantity is None) or self.price is not None:
                raise ValueError("a MARKET order takes exactly one of quantity, quote_quantity")
            if self.time_in_force is not None:
                raise ValueError("a MARKET order takes no time_in_force")
        else:
            raise ValueError(f"adapters place MARKET and LIMIT orders, not {self.type}")


MAX_AMOUNT_DIGITS = 40
"""Most significant digits an amount may have, and most places either side of the point.
Binance writes amounts with 8 decimals and at most 20 digits before the point."""


def amount(value: object) -> Decimal:
    """A venue's amount (price, quantity, commission, balance): a finite, non-negative decimal
    given as a JSON string or number, with at most :data:`MAX_AMOUNT_DIGITS` digits.

    ``ValueError`` otherwise. An adapter then reads the whole answer as unreadable
    (``Unknown``), so the gateway reconciles the order by its client id instead of
    journaling a NaN, a negative fill, or a number whose plain text is a million digits
    (``1e999999``: every event that carries it would be a megabyte).
    """
    if isinstance(value, bool) or not isinstance(value, str | int | Decimal):
        raise ValueError(f"not an amount: {type(value).__name__}")
    try:
        number = Decimal(value)
    except InvalidOperation:
        raise ValueError("not an amount: not a decimal") from None
    if not number.is_finite() or number < 0:
        raise ValueError(f"not an amount: {number}")
    digits = number.as_tuple().digits
    if number and (len(digits) > MAX_AMOUNT_DIGITS or abs(number.adjusted()) > MAX_AMOUNT_DIGITS):
        raise ValueError("not an amount: more digits than any venue writes")
    return number


def epoch_ms(value: object) -> int | None:
    """A venue's time in epoch milliseconds (a JSON integer), or ``None`` if absent;
    ``ValueError`` for anything else (a string, a float, a boolean, a negative number or one
    no Avro long holds)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
        raise ValueError(f"not a time in epoch milliseconds: {type(value).__name__}")
    return value


@dataclass(frozen=True)
class Fill:
    """One execution of an order."""

    price: Decimal
    quantity: Decimal
    commission: Decimal
    commission_asset: str
    trade_id: str


@dataclass(frozen=True)
class Accepted:
    """The venue has this order. ``fills`` is None when the venue did not list them (a cancel
    answer, or a trade lookup that failed); an empty tuple means "no fills"."""

    venue_order_id: str
    client_order_id: str
    symbol: str
    side: Side
    type: OrderType
    status: OrderStatus
    quantity: Decimal
    executed_quantity: Decimal
    cumulative_quote_quantity: Decimal
    price: Decimal | None = None
    quote_quantity: Decimal | None = None
    time_in_force: TimeInForce | None = None
    created_at_ms: int | None = None
    updated_at_ms: int | None = None
    fills: tuple[Fill, ...] | None = None

    @property
    def is_open(self) -> bool:
        return self.status.is_open

    @property
    def is_filled(self) -> bool:
        return self.status is OrderStatus.FILLED


class RejectReason(StrEnum):
    """Why a request was definitely not performed."""

    INSUFFICIENT_BALANCE = "insufficient_balance"
    DUPLICATE_CLIENT_ORDER_ID = "duplicate_client_order_id"  # an OPEN order has this id
    FILTER_FAILURE = "filter_failure"  # price/quantity/notional rules of the symbol
    INVALID_REQUEST = "invalid_request"
    OUTSIDE_RECV_WINDOW = "outside_recv_window"  # late (or early) attempt: refused by time
    UNAUTHORIZED = "unauthorized"  # key, signature or permissions
    RATE_LIMITED = "rate_limited"
    ORDER_REJECTED = "order_rejected"  # refused by the matching engine for another reason
    CANCEL_REJECTED = "cancel_rejected"  # e.g. cancel restrictions
    NOT_SENT = "not_sent"  # no connection could be made: nothing left this process


@dataclass(frozen=True)
class Rejected:
    """The request was refused and not performed. ``code`` is the venue's own (Binance's
    number, or the native API's string)."""

    reason: RejectReason
    code: int | str | None
    message: str
    http_status: int | None = None


@dataclass(frozen=True)
class NotFound:
    """No such order (query) or no such open order (cancel), as of this answer."""

    code: int | str | None
    message: str


class UnknownReason(StrEnum):
    TIMEOUT = "timeout"  # no answer within the read timeout
    CONNECTION = "connection"  # connection lost after the request may have been sent
    SERVER_ERROR = "server_error"  # HTTP 5xx
    STATUS_UNKNOWN = "status_unknown"  # the venue said so (-1007, -1006, -1000, ...)
    UNREADABLE = "unreadable"  # an answer this adapter cannot interpret
    UNRECOGNIZED = "unrecognized"  # an error code not in the adapter's table
    QUERY_REFUSED = "query_refused"  # a query/list the venue refused: no evidence


@dataclass(frozen=True)
class Unknown:
    """The outcome may or may not exist; reconcile, never resend blindly."""

    reason: UnknownReason
    detail: str
    code: int | str | None = None
    http_status: int | None = None


@dataclass(frozen=True)
class Balance:
    asset: str
    free: Decimal
    locked: Decimal

    @property
    def total(self) -> Decimal:
        return self.free + self.locked


@dataclass(frozen=True)
class Balances:
    """Every asset the account holds (assets not listed are zero)."""

    balances: tuple[Balance, ...]

    def get(self, asset: str) -> Balance:
        zero = Decimal(0)
        return next((b for b in self.balances if b.asset == asset), Balance(asset, zero, zero))


@dataclass(frozen=True)
class OpenOrders:
    orders: tuple[Accepted, ...]


@dataclass(frozen=True)
class Exposure:
    """What an account holds and has working on one symbol.

    ``lot_step`` is the symbol's quantity step as the venue states it (Binance's LOT_SIZE
    ``stepSize``), ``None`` if it states none: an order for any other multiple is refused.
    """

    symbol: str
    base: Balance
    quote: Balance
    open_orders: tuple[Accepted, ...] = field(default_factory=tuple)
    lot_step: Decimal | None = None


PlaceAnswer = Accepted | Rejected | Unknown
QueryAnswer = Accepted | NotFound | Unknown
CancelAnswer = Accepted | NotFound | Rejected | Unknown
OpenOrdersAnswer = OpenOrders | Unknown
BalancesAnswer = Balances | Unknown
ExposureAnswer = Exposure | Unknown


class VenueAdapter(Protocol):
    """A venue, as the execution gateway sees it. Synchronous; not thread-safe.

    Implementations never raise for anything the venue or the network does: every outcome is
    an answer above. They raise only for programming errors (for example a LIMIT request
    without a price).
    """

    name: str

    def place(self, order: OrderRequest, attempt: Attempt) -> PlaceAnswer:
        """Send one new order with ``order.client_order_id``; never retried internally."""
        ...

    def query(self, symbol: str, client_order_id: str, attempt: Attempt) -> QueryAnswer:
        """The newest order with this client id (ids may be reused once an order is closed:
        compare ``venue_order_id``/``created_at_ms`` with what you expect)."""
        ...

    def query_by_venue_id(self, symbol: str, venue_order_id: str, attempt: Attempt) -> QueryAnswer:
        """The order with this venue order id."""
        ...

    def cancel(self, symbol: str, client_order_id: str, attempt: Attempt) -> CancelAnswer:
        """Cancel the OPEN order with this client id."""
        ...

    def open_orders(self, symbol: str | None, attempt: Attempt) -> OpenOrdersAnswer:
        """Open orders on ``symbol`` (every symbol when None)."""
        ...

    def balances(self, attempt: Attempt) -> BalancesAnswer:
        """The account's balances."""
        ...

    def exposure(self, symbol: str, attempt: Attempt) -> ExposureAnswer:
        """Base and quote balances of ``symbol`` and its open orders."""
        ...

    def close(self) -> None:
        """Close the connection (the adapter reconnects if used again)."""
        ...
