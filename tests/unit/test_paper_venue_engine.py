"""The paper venue's matching rules on a real state file, with a controllable clock."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumers.paper_venue.config import AccountSpec, SymbolSpec, VenueConfig
from consumers.paper_venue.engine import Exchange, NewOrder
from consumers.paper_venue.errors import Refusal, RefusalKind
from consumers.paper_venue.store import Store

D = Decimal
BTC = SymbolSpec(
    "BTCUSDT",
    "BTC",
    "USDT",
    D("50000.00"),
    D("0.01"),
    D("0.00001"),
    D("0.00001"),
    D("9000"),
    D("5"),
)
CONFIG = VenueConfig(
    symbols={"BTCUSDT": BTC},
    accounts=(AccountSpec("a", "k", "s", {"USDT": D("100000"), "BTC": D("2")}),),
    maker_commission=D("0.001"),
    taker_commission=D("0.002"),
)


class Clock:
    def __init__(self) -> None:
        self.ms = 1_800_000_000_000

    def __call__(self) -> int:
        return self.ms


@contextmanager
def exchange() -> Iterator[tuple[Exchange, Clock]]:
    with tempfile.TemporaryDirectory() as directory:
        store = Store(Path(directory) / "venue.sqlite3")
        clock = Clock()
        ex = Exchange(store, CONFIG, clock)
        ex.seed_if_new()
        try:
            yield ex, clock
        finally:
            store.close()


def market(cid: str, side: str = "BUY", qty: str = "0.01") -> NewOrder:
    return NewOrder("BTCUSDT", side, "MARKET", cid, quantity=D(qty))


def limit(cid: str, side: str, qty: str, price: str, tif: str = "GTC") -> NewOrder:
    return NewOrder("BTCUSDT", side, "LIMIT", cid, tif, D(qty), None, D(price))


def test_quiet_period_hides_an_order_from_queries_but_not_from_the_engine() -> None:
    with exchange() as (ex, clock):
        ex.place("a", limit("Q1", "BUY", "0.1", "49000.00"), api="t", quiet_ms=3000)
        with pytest.raises(Refusal) as hidden:
            ex.get("a", "BTCUSDT", client_id="Q1")
        assert (hidden.value.code, hidden.value.msg) == (-2013, "Order does not exist.")
        assert ex.open_orders("a", "BTCUSDT") == []
        with pytest.raises(Refusal) as duplicate:  # the matching engine knows it
            ex.place("a", market("Q1"), api="t")
        assert duplicate.value.kind is RefusalKind.DUPLICATE_CLIENT_ORDER_ID
        clock.ms += 2999
        with pytest.raises(Refusal):
            ex.get("a", "BTCUSDT", client_id="Q1")
        clock.ms += 1
        assert ex.get("a", "BTCUSDT", client_id="Q1").order.status == "NEW"
        assert len(ex.open_orders("a", None)) == 1


def test_quiet_period_hides_the_trades_of_a_filled_order_too() -> None:
    with exchange() as (ex, clock):
        ex.place("a", market("Q3"), api="t", quiet_ms=1000)
        assert ex.trades("a", "BTCUSDT", order_id=None, from_id=0, limit=10) == []
        assert len(ex.store.trades()) == 1  # the admin view is the truth
        clock.ms += 1000
        [trade] = ex.trades("a", "BTCUSDT", order_id=None, from_id=0, limit=10)
        assert (trade.qty, trade.price, trade.is_maker) == (D("0.01"), D("50000.00"), False)


def test_a_reused_client_id_of_a_closed_order_is_a_new_order_and_queries_see_the_newest() -> None:
    with exchange() as (ex, _):
        first = ex.place("a", market("R1"), api="t").order
        second = ex.place("a", market("R1"), api="t").order
        assert first.order_id != second.order_id
        assert ex.get("a", "BTCUSDT", client_id="R1").order.order_id == second.order_id
        assert ex.get("a", "BTCUSDT", order_id=first.order_id).order.order_id == first.order_id
        with pytest.raises(Refusal):
            ex.get("a", "BTCUSDT", order_id=first.order_id, client_id="other")


def test_the_second_window_check_runs_inside_the_transaction_and_writes_nothing() -> None:
    def late() -> None:
        raise Refusal(RefusalKind.REQUEST_EXPIRED, -1021, "late")

    with exchange() as (ex, _):
        with pytest.raises(Refusal):
            ex.place("a", market("W1"), api="t", still_fresh=late)
        assert ex.store.all_orders() == []
        assert ex.balances("a") == [("BTC", D("2"), D("0")), ("USDT", D("100000"), D("0"))]


def test_volume_limits_fills_by_price_then_time_priority() -> None:
    with exchange() as (ex, _):
        ex.place("a", limit("B1", "BUY", "0.1", "49000.00"), api="t")
        ex.place("a", limit("B2", "BUY", "0.1", "49500.00"), api="t")
        ex.place("a", limit("B3", "BUY", "0.1", "49500.00"), api="t")
        fills = ex.set_price("BTCUSDT", D("48000"), D("0.15"))
        assert [(t.order_id, t.qty, t.price) for t in fills] == [
            (2, D("0.1"), D("49500.00")),
            (3, D("0.05"), D("49500.00")),
        ]
        statuses = {o.client_order_id: o.status for o in ex.store.all_orders()}
        assert statuses == {"B1": "NEW", "B2": "FILLED", "B3": "PARTIALLY_FILLED"}


orders = st.lists(
    st.tuples(
        st.sampled_from(["market", "limit", "ioc", "cancel", "price"]),
        st.sampled_from(["BUY", "SELL"]),
        st.integers(1, 5000).map(lambda n: D(n) / 100000),
        st.integers(45000_00, 55000_00).map(lambda n: D(n) / 100),
        st.one_of(st.none(), st.integers(1, 20000).map(lambda n: D(n) / 100000)),
    ),
    max_size=12,
)


@settings(max_examples=40, deadline=None)
@given(orders)
def test_balances_are_conserved_and_locks_match_open_orders(script: list[tuple]) -> None:  # type: ignore[type-arg]
    with exchange() as (ex, _):
        for n, (kind, side, qty, price, volume) in enumerate(script):
            try:
                if kind == "market":
                    ex.place(
                        "a", NewOrder("BTCUSDT", side, "MARKET", f"c{n}", quantity=qty), api="t"
                    )
                elif kind in ("limit", "ioc"):
                    tif = "GTC" if kind == "limit" else "IOC"
                    ex.place("a", limit(f"c{n}", side, str(qty), str(price), tif), api="t")
                elif kind == "cancel":
                    open_ = ex.store.open_orders("a", None)
                    if open_:
                        ex.cancel("a", "BTCUSDT", order_id=open_[0].order_id)
                else:
                    ex.set_price("BTCUSDT", price, volume)
            except Refusal as refusal:
                assert refusal.kind in (
                    RefusalKind.INSUFFICIENT_BALANCE,
                    RefusalKind.FILTER_FAILURE,
                )
        balances = {a: (f, lk) for a, f, lk in ex.balances("a")}
        trades = ex.store.trades()
        base = D(2) + sum((t.qty - t.commission if t.side == "BUY" else -t.qty) for t in trades)
        quote = D(100000) + sum(
            (-t.quote_qty if t.side == "BUY" else t.quote_qty - t.commission) for t in trades
        )
        assert balances["BTC"][0] + balances["BTC"][1] == base
        assert balances["USDT"][0] + balances["USDT"][1] == quote
        open_ = ex.store.open_orders("a", None)
        locked_quote = sum(
            (o.price * (o.orig_qty - o.executed_qty) for o in open_ if o.side == "BUY"), D(0)
        )
        locked_base = sum((o.orig_qty - o.executed_qty for o in open_ if o.side == "SELL"), D(0))
        assert (balances["USDT"][1], balances["BTC"][1]) == (locked_quote, locked_base)
        assert all(f >= 0 for f, _ in balances.values())
