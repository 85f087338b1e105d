"""The paper venue's matching rules: orders, fills, balances, prices.

There is no order book between users: every symbol has one configured price (set by the admin
API). A MARKET order fills completely at that price; a LIMIT order that crosses it fills at it
as a taker, otherwise GTC rests (locking its balance), IOC/FOK expire. When the price is moved
across a resting LIMIT order, the order fills at its own limit price as a maker, up to the
``volume`` traded at the new price if one is given (that is the only way to get partial
fills). Every operation is one durable transaction (see :mod:`consumers.paper_venue.store`).

An order placed with a quiet period (the "order does not exist" fault) is invisible to queries,
open-order lists and trade lists until ``visible_from_ms``; the matching engine itself (fills,
cancels, the client-id uniqueness check, balances) sees it at once, as on an exchange whose
query path lags its matching engine.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from decimal import Decimal

from consumers.paper_venue.config import SymbolSpec, VenueConfig
from consumers.paper_venue.errors import (
    MSG_DUPLICATE,
    MSG_INSUFFICIENT,
    MSG_NO_SUCH_ORDER,
    MSG_UNKNOWN_ORDER,
    Refusal,
    RefusalKind,
    invalid,
)
from consumers.paper_venue.money import (
    ZERO,
    add,
    fill_effect,
    is_multiple,
    mul,
    neg,
    quantity_for_quote,
    reserve_for,
    sub,
)
from consumers.paper_venue.rows import OrderRow, TradeRow
from consumers.paper_venue.store import Store

SEEDED = "seeded"


def wall_ms() -> int:
    """Milliseconds since the epoch, from the system clock."""
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class NewOrder:
    """A syntactically valid order request (each API parses its own wire format into this)."""

    symbol: str
    side: str  # BUY | SELL
    type: str  # MARKET | LIMIT
    client_order_id: str
    time_in_force: str | None = None  # GTC | IOC | FOK, LIMIT only
    quantity: Decimal | None = None
    quote_quantity: Decimal | None = None  # MARKET only, instead of quantity
    price: Decimal | None = None  # LIMIT only


@dataclass(frozen=True)
class OrderView:
    """An order with its fills, oldest fill first."""

    order: OrderRow
    fills: list[TradeRow]


class Exchange:
    """The venue's rules on top of its store. Not thread-safe: one event loop owns it."""

    def __init__(
        self, store: Store, config: VenueConfig, clock: Callable[[], int] = wall_ms
    ) -> None:
        self.store = store
        self.config = config
        self.clock = clock

    # -- lifecycle ---------------------------------------------------------------------------

    def seed_if_new(self) -> bool:
        """Write the configured balances and prices into a fresh state; True if it was fresh."""
        with self.store.transaction():
            if self.store.meta(SEEDED) is not None:
                self._add_new_symbols()
                return False
            self._seed()
            return True

    def reset(self) -> None:
        """Forget every order, trade and fault; balances and prices as configured."""
        with self.store.transaction():
            self.store.wipe()
            self._seed()

    def _seed(self) -> None:
        now = self.clock()
        for spec in self.config.symbols.values():
            self.store.set_price(spec.symbol, spec.price, now)
        for account in self.config.accounts:
            for asset, amount in account.balances.items():
                self.store.set_balance(account.name, asset, amount, ZERO)
        self.store.set_meta(SEEDED, str(now))

    def _add_new_symbols(self) -> None:
        now = self.clock()
        for spec in self.config.symbols.values():
            if self.store.price(spec.symbol) is None:
                self.store.set_price(spec.symbol, spec.price, now)

    def spec(self, symbol: str) -> SymbolSpec:
        spec = self.config.symbols.get(symbol)
        if spec is None:
            raise Refusal(RefusalKind.UNKNOWN_SYMBOL, -1121, "Invalid symbol.")
        return spec

    # -- orders ------------------------------------------------------------------------------

    def place(
        self,
        account: str,
        new: NewOrder,
        *,
        api: str,
        quiet_ms: int = 0,
        still_fresh: Callable[[], None] = lambda: None,
    ) -> OrderView:
        """Accept ``new`` durably, filling it at once if it is marketable.

        ``still_fresh`` is called inside the transaction just before the order is written and
        raises a refusal if the request's window has passed meanwhile (Binance checks the
        window a second time before the matching engine).
        """
        spec = self.spec(new.symbol)
        with self.store.transaction():
            market = self._price(spec.symbol)
            qty = self._checked_quantity(spec, new, market)
            existing = self.store.orders_with_client_id(account, spec.symbol, new.client_order_id)
            if any(o.is_open for o in existing):
                raise Refusal(RefusalKind.DUPLICATE_CLIENT_ORDER_ID, -2010, MSG_DUPLICATE)
            self._require_balance(account, spec, new, qty, market)
            marketable = new.type == "MARKET" or (
                new.price is not None
                and (new.price >= market if new.side == "BUY" else new.price <= market)
            )
            still_fresh()
            now = self.clock()
            order = OrderRow(
                order_id=0,
                account=account,
                symbol=spec.symbol,
                client_order_id=new.client_order_id,
                side=new.side,
                type=new.type,
                time_in_force=new.time_in_force or "GTC",
                price=new.price or ZERO,
                orig_qty=qty,
                orig_quote_qty=new.quote_quantity or ZERO,
                executed_qty=ZERO,
                cumm_quote_qty=ZERO,
                status="NEW",
                time_ms=now,
                update_time_ms=now,
                visible_from_ms=now + quiet_ms,
                api=api,
            )
            self.store.insert_order(order)
            fills: list[TradeRow] = []
            if marketable:
                fills.append(self._fill(order, spec, market, qty, maker=False, now=now))
            elif order.time_in_force in ("IOC", "FOK"):
                order.status = "EXPIRED"
                self.store.update_order(order)
            else:
                self._lock(account, spec, order)
        return OrderView(order, fills)

    def get(
        self,
        account: str,
        symbol: str,
        *,
        order_id: int | None = None,
        client_id: str | None = None,
    ) -> OrderView:
        """The order by venue id, or the newest order with ``client_id``; -2013 if there is
        none visible (or if both are given and do not belong to the same order)."""
        spec = self.spec(symbol)
        now = self.clock()
        order = self._find(
            account, spec.symbol, order_id, client_id, lambda o: o.visible_from_ms <= now
        )
        if order is None:
            raise Refusal(RefusalKind.ORDER_NOT_FOUND, -2013, MSG_NO_SUCH_ORDER)
        return OrderView(order, self.store.trades(order_ids=[order.order_id]))

    def cancel(
        self,
        account: str,
        symbol: str,
        *,
        order_id: int | None = None,
        client_id: str | None = None,
    ) -> OrderView:
        """Cancel an open order and unlock what it reserved; -2011 if no such order is open
        (never placed, or already filled, canceled or expired)."""
        spec = self.spec(symbol)
        with self.store.transaction():
            order = self._find(account, spec.symbol, order_id, client_id, lambda o: o.is_open)
            if order is None or not order.is_open:
                raise Refusal(RefusalKind.ORDER_NOT_OPEN, -2011, MSG_UNKNOWN_ORDER)
            self._unlock(order, spec, sub(order.orig_qty, order.executed_qty))
            order.status = "CANCELED"
            order.update_time_ms = self.clock()
            self.store.update_order(order)
        return OrderView(order, self.store.trades(order_ids=[order.order_id]))

    def open_orders(self, account: str, symbol: str | None) -> list[OrderView]:
        """Visible open orders, oldest first (every symbol when ``symbol`` is None)."""
        if symbol is not None:
            symbol = self.spec(symbol).symbol
        now = self.clock()
        orders = [o for o in self.store.open_orders(account, symbol) if o.visible_from_ms <= now]
        trades = self.store.trades(order_ids=[o.order_id for o in orders])
        return [OrderView(o, [t for t in trades if t.order_id == o.order_id]) for o in orders]

    def trades(
        self,
        account: str,
        symbol: str,
        *,
        order_id: int | None,
        from_id: int | None,
        limit: int,
        since_ms: int | None = None,
        until_ms: int | None = None,
    ) -> list[TradeRow]:
        """The account's visible trades on ``symbol``, optionally of one order, optionally
        only those made from ``since_ms`` to ``until_ms`` (both included): at most ``limit``
        of them, those from trade id ``from_id`` on, or the most recent ones without one
        (as Binance's ``myTrades`` answers), oldest first either way."""
        spec = self.spec(symbol)
        return self.store.trades(
            account=account,
            symbol=spec.symbol,
            order_ids=None if order_id is None else [order_id],
            from_id=from_id or 0,
            limit=limit,
            visible_at_ms=self.clock(),
            since_ms=since_ms,
            until_ms=until_ms,
            newest=from_id is None,
        )

    def balances(self, account: str) -> list[tuple[str, Decimal, Decimal]]:
        return self.store.balances(account)

    # -- admin -------------------------------------------------------------------------------

    def set_price(self, symbol: str, price: Decimal, volume: Decimal | None) -> list[TradeRow]:
        """Move the price; resting orders it crosses fill at their limit, best price first,
        then oldest first, up to ``volume`` in total (unlimited when None)."""
        spec = self.spec(symbol)
        fills: list[TradeRow] = []
        with self.store.transaction():
            now = self.clock()
            self.store.set_price(spec.symbol, price, now)
            crossing = [
                o
                for o in self.store.resting_orders(spec.symbol)
                if (price <= o.price if o.side == "BUY" else price >= o.price)
            ]
            crossing.sort(key=lambda o: (neg(o.price) if o.side == "BUY" else o.price, o.order_id))
            left = volume
            for order in crossing:
                qty = sub(order.orig_qty, order.executed_qty)
                if left is not None:
                    qty = min(qty, left)
                    left = sub(left, qty)
                if qty <= 0:
                    break
                self._unlock(order, spec, qty)
                fills.append(self._fill(order, spec, order.price, qty, maker=True, now=now))
        return fills

    def set_balance(self, account: str, asset: str, free: Decimal) -> None:
        """Set an account's free balance of ``asset`` (locked amounts stay as they are)."""
        with self.store.transaction():
            _, locked = self.store.balance(account, asset)
            self.store.set_balance(account, asset, free, locked)

    # -- internals ---------------------------------------------------------------------------

    def _price(self, symbol: str) -> Decimal:
        price = self.store.price(symbol)
        if price is None:  # a symbol added to the config after seeding and not yet priced
            return self.spec(symbol).price
        return price

    def _find(
        self,
        account: str,
        symbol: str,
        order_id: int | None,
        client_id: str | None,
        prefer: Callable[[OrderRow], bool],
    ) -> OrderRow | None:
        if order_id is not None:
            order = self.store.order(account, symbol, order_id)
            if order is None or (client_id is not None and order.client_order_id != client_id):
                return None
            return order if prefer(order) else None
        assert client_id is not None
        candidates = self.store.orders_with_client_id(account, symbol, client_id)
        return next((o for o in candidates if prefer(o)), None)

    def _checked_quantity(self, spec: SymbolSpec, new: NewOrder, market: Decimal) -> Decimal:
        if new.type == "LIMIT":
            assert new.price is not None
            if new.price <= 0 or not is_multiple(new.price, spec.tick_size):
                raise invalid(-1013, "Filter failure: PRICE_FILTER")
        if new.quantity is not None:
            qty = new.quantity
            if not is_multiple(qty, spec.step_size):
                raise invalid(-1013, "Filter failure: LOT_SIZE")
        else:
            assert new.quote_quantity is not None
            qty = quantity_for_quote(new.quote_quantity, market, spec.step_size)
        if not spec.min_qty <= qty <= spec.max_qty:
            raise invalid(-1013, "Filter failure: LOT_SIZE")
        notional = mul(new.price if new.type == "LIMIT" and new.price else market, qty)
        if notional < spec.min_notional:
            raise invalid(-1013, "Filter failure: NOTIONAL")
        return qty

    def _require_balance(
        self, account: str, spec: SymbolSpec, new: NewOrder, qty: Decimal, market: Decimal
    ) -> None:
        if new.side == "BUY":
            price = new.price if new.type == "LIMIT" and new.price is not None else market
            need, asset = mul(price, qty), spec.quote
        else:
            need, asset = qty, spec.base
        free, _ = self.store.balance(account, asset)
        if free < need:
            raise Refusal(RefusalKind.INSUFFICIENT_BALANCE, -2010, MSG_INSUFFICIENT)

    def _lock(self, account: str, spec: SymbolSpec, order: OrderRow) -> None:
        asset = spec.quote if order.side == "BUY" else spec.base
        amount = reserve_for(order.side, order.price, order.orig_qty)
        free, locked = self.store.balance(account, asset)
        self.store.set_balance(account, asset, sub(free, amount), add(locked, amount))

    def _unlock(self, order: OrderRow, spec: SymbolSpec, qty: Decimal) -> None:
        asset = spec.quote if order.side == "BUY" else spec.base
        amount = reserve_for(order.side, order.price, qty)
        free, locked = self.store.balance(order.account, asset)
        self.store.set_balance(order.account, asset, add(free, amount), sub(locked, amount))

    def _fill(
        self,
        order: OrderRow,
        spec: SymbolSpec,
        price: Decimal,
        qty: Decimal,
        *,
        maker: bool,
        now: int,
    ) -> TradeRow:
        rate = self.config.maker_commission if maker else self.config.taker_commission
        effect = fill_effect(order.side, price, qty, rate)
        for asset, change in ((spec.base, effect.base_change), (spec.quote, effect.quote_change)):
            free, locked = self.store.balance(order.account, asset)
            self.store.set_balance(order.account, asset, add(free, change), locked)
        order.executed_qty = add(order.executed_qty, qty)
        order.cumm_quote_qty = add(order.cumm_quote_qty, effect.quote_quantity)
        order.status = "FILLED" if order.executed_qty == order.orig_qty else "PARTIALLY_FILLED"
        order.update_time_ms = now
        self.store.update_order(order)
        trade = TradeRow(
            0,
            order.order_id,
            order.account,
            order.symbol,
            order.side,
            price,
            qty,
            effect.quote_quantity,
            effect.commission,
            spec.base if effect.commission_in_base else spec.quote,
            maker,
            now,
        )
        trade_id = self.store.insert_trade(trade)
        return replace(trade, trade_id=trade_id)
