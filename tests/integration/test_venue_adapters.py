"""Every venue operation through both adapters, against a real ``sluicegate venue`` process.

The same tests run through the Binance Spot client and through the paper venue's native
adapter: the gateway is written against the interface, so both must give the same answers.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from decimal import Decimal

import pytest

from consumers.venue.adapter import (
    Accepted,
    Attempt,
    Balances,
    Exposure,
    Fill,
    NotFound,
    OpenOrders,
    OrderRequest,
    OrderStatus,
    OrderType,
    Rejected,
    RejectReason,
    Side,
    TimeInForce,
    Unknown,
    UnknownReason,
    VenueAdapter,
)
from consumers.venue.binance_spot import BinanceSpotClient
from consumers.venue.paper import PaperVenueClient
from tests.support.ports import free_port
from tests.support.venue import API_KEY, VenueProcess, now_attempt

D = Decimal
ADAPTERS = ["binance", "paper"]


@pytest.fixture(params=ADAPTERS)
def adapter(request: pytest.FixtureRequest, venue: VenueProcess) -> Iterator[VenueAdapter]:
    client = venue.adapter(request.param)
    yield client
    client.close()


def market(cid: str, side: Side = Side.BUY, qty: str = "0.01") -> OrderRequest:
    return OrderRequest("BTCUSDT", side, OrderType.MARKET, cid, quantity=D(qty))


def limit(
    cid: str, side: Side, qty: str, price: str, tif: TimeInForce | None = None
) -> OrderRequest:
    return OrderRequest("BTCUSDT", side, OrderType.LIMIT, cid, D(qty), None, D(price), tif)


def accepted(answer: object) -> Accepted:
    assert isinstance(answer, Accepted), answer
    return answer


def test_market_order_fills_at_the_configured_price_and_balances_move(
    adapter: VenueAdapter, venue: VenueProcess
) -> None:
    order = accepted(adapter.place(market("E1"), now_attempt()))
    assert (order.status, order.executed_quantity, order.cumulative_quote_quantity) == (
        OrderStatus.FILLED,
        D("0.01"),
        D("500"),
    )
    assert order.fills is not None
    assert [(f.price, f.quantity, f.commission, f.commission_asset) for f in order.fills] == [
        (D("50000"), D("0.01"), D("0.00002"), "BTC")  # taker 0.2% of the base received
    ]
    balances = adapter.balances(now_attempt())
    assert isinstance(balances, Balances)
    assert (balances.get("USDT").free, balances.get("BTC").free) == (D("99500"), D("2.00998"))
    assert venue.balances()["USDT"] == (D("99500"), D("0"))


def test_market_order_by_quote_quantity_spends_at_most_that(adapter: VenueAdapter) -> None:
    order = accepted(
        adapter.place(
            OrderRequest("BTCUSDT", Side.BUY, OrderType.MARKET, "Q1", quote_quantity=D("1234.56")),
            now_attempt(),
        )
    )
    assert (order.quantity, order.executed_quantity) == (D("0.02469"), D("0.02469"))
    assert order.cumulative_quote_quantity == D("1234.5")
    assert order.quote_quantity == D("1234.56")
    sold = accepted(
        adapter.place(
            OrderRequest("BTCUSDT", Side.SELL, OrderType.MARKET, "Q2", quote_quantity=D("100")),
            now_attempt(),
        )
    )
    assert (sold.executed_quantity, sold.cumulative_quote_quantity) == (D("0.002"), D("100"))


def test_limit_order_rests_locks_and_fills_when_the_price_crosses(
    adapter: VenueAdapter, venue: VenueProcess
) -> None:
    order = accepted(adapter.place(limit("L1", Side.BUY, "0.1", "49000.00"), now_attempt()))
    assert (order.status, order.executed_quantity, order.price) == (
        OrderStatus.NEW,
        D("0"),
        D("49000"),
    )
    assert order.time_in_force is TimeInForce.GTC
    exposure = adapter.exposure("BTCUSDT", now_attempt())
    assert isinstance(exposure, Exposure)
    assert (exposure.quote.free, exposure.quote.locked) == (D("95100"), D("4900"))
    assert [o.client_order_id for o in exposure.open_orders] == ["L1"]
    assert exposure.lot_step == D("0.00001")  # the symbol's LOT_SIZE step, for sizing
    assert venue.set_price("BTCUSDT", "49000.01") == []
    assert accepted(adapter.query("BTCUSDT", "L1", now_attempt())).status is OrderStatus.NEW
    [fill] = venue.set_price("BTCUSDT", "48900.00")
    assert (fill["price"], fill["quantity"], fill["maker"]) == ("49000.00", "0.1", True)
    done = accepted(adapter.query("BTCUSDT", "L1", now_attempt()))
    assert (done.status, done.executed_quantity, done.cumulative_quote_quantity) == (
        OrderStatus.FILLED,
        D("0.1"),
        D("4900"),
    )
    assert done.fills is not None
    assert [(f.price, f.quantity, f.commission) for f in done.fills] == [
        (D("49000"), D("0.1"), D("0.0001"))  # maker 0.1%
    ]
    after = adapter.exposure("BTCUSDT", now_attempt())
    assert isinstance(after, Exposure)
    assert (after.quote.free, after.quote.locked, after.base.free) == (
        D("95100"),
        D("0"),
        D("2.0999"),
    )
    assert after.open_orders == ()


def test_partial_fill_then_cancel_unlocks_the_rest(
    adapter: VenueAdapter, venue: VenueProcess
) -> None:
    accepted(adapter.place(limit("S1", Side.SELL, "1", "51000.00"), now_attempt()))
    venue.set_price("BTCUSDT", "51000.00", volume="0.4")
    part = accepted(adapter.query("BTCUSDT", "S1", now_attempt()))
    assert (part.status, part.executed_quantity) == (OrderStatus.PARTIALLY_FILLED, D("0.4"))
    assert part.is_open
    canceled = accepted(adapter.cancel("BTCUSDT", "S1", now_attempt()))
    assert (canceled.status, canceled.executed_quantity) == (OrderStatus.CANCELED, D("0.4"))
    balances = adapter.balances(now_attempt())
    assert isinstance(balances, Balances)
    assert balances.get("BTC").free == D("1.6") and balances.get("BTC").locked == 0
    assert balances.get("USDT").free == D("100000") + D("20400") - D("20.4")


def test_marketable_limit_fills_at_once_and_ioc_that_does_not_cross_expires(
    adapter: VenueAdapter, venue: VenueProcess
) -> None:
    crossed = accepted(adapter.place(limit("X1", Side.BUY, "0.01", "60000.00"), now_attempt()))
    assert crossed.status is OrderStatus.FILLED
    assert crossed.cumulative_quote_quantity == D("500")  # at the market, not the limit
    expired = accepted(
        adapter.place(limit("X2", Side.BUY, "0.01", "40000.00", TimeInForce.IOC), now_attempt())
    )
    assert (expired.status, expired.executed_quantity) == (OrderStatus.EXPIRED, D("0"))
    assert venue.balances()["USDT"] == (D("99500"), D("0"))


def test_query_by_client_id_and_by_venue_id_and_not_found(adapter: VenueAdapter) -> None:
    order = accepted(adapter.place(market("F1"), now_attempt()))
    by_client = accepted(adapter.query("BTCUSDT", "F1", now_attempt()))
    by_venue = accepted(adapter.query_by_venue_id("BTCUSDT", order.venue_order_id, now_attempt()))
    assert by_client.venue_order_id == by_venue.venue_order_id == order.venue_order_id
    assert by_client.fills == order.fills
    missing = adapter.query("BTCUSDT", "never-placed", now_attempt())
    assert isinstance(missing, NotFound), missing
    assert isinstance(adapter.query_by_venue_id("BTCUSDT", "999999", now_attempt()), NotFound)


def test_cancel_answers(adapter: VenueAdapter) -> None:
    accepted(adapter.place(limit("C1", Side.BUY, "0.01", "40000.00"), now_attempt()))
    assert accepted(adapter.cancel("BTCUSDT", "C1", now_attempt())).status is OrderStatus.CANCELED
    assert isinstance(adapter.cancel("BTCUSDT", "C1", now_attempt()), NotFound)  # no longer open
    accepted(adapter.place(market("C2"), now_attempt()))
    assert isinstance(adapter.cancel("BTCUSDT", "C2", now_attempt()), NotFound)  # filled
    assert isinstance(adapter.cancel("BTCUSDT", "never", now_attempt()), NotFound)
    assert accepted(adapter.query("BTCUSDT", "C1", now_attempt())).status is OrderStatus.CANCELED


def test_open_orders_for_one_symbol_and_all(adapter: VenueAdapter) -> None:
    accepted(adapter.place(limit("O1", Side.BUY, "0.01", "40000.00"), now_attempt()))
    eth = OrderRequest("ETHUSDT", Side.BUY, OrderType.LIMIT, "O2", D("1"), None, D("2000.00"))
    accepted(adapter.place(eth, now_attempt()))
    accepted(adapter.place(market("O3"), now_attempt()))
    btc = adapter.open_orders("BTCUSDT", now_attempt())
    every = adapter.open_orders(None, now_attempt())
    assert isinstance(btc, OpenOrders) and isinstance(every, OpenOrders)
    assert [o.client_order_id for o in btc.orders] == ["O1"]
    assert sorted(o.client_order_id for o in every.orders) == ["O1", "O2"]


def test_rejections_place_nothing(adapter: VenueAdapter, venue: VenueProcess) -> None:
    cases = [
        (market("N1", qty="10"), RejectReason.INSUFFICIENT_BALANCE),
        (market("N2", side=Side.SELL, qty="3"), RejectReason.INSUFFICIENT_BALANCE),
        (market("N3", qty="0.000011"), RejectReason.FILTER_FAILURE),  # not on the lot step
        (market("N4", qty="0.00005"), RejectReason.FILTER_FAILURE),  # notional 2.5 < 5
        (limit("N5", Side.BUY, "0.01", "40000.001"), RejectReason.FILTER_FAILURE),  # tick
        (market("N6", qty="0.000010001"), RejectReason.INVALID_REQUEST),  # 9 decimals
        (
            OrderRequest("NOPE", Side.BUY, OrderType.MARKET, "N7", quantity=D("1")),
            RejectReason.INVALID_REQUEST,
        ),
        (market("bad id with spaces"), RejectReason.INVALID_REQUEST),
    ]
    for request, reason in cases:
        answer = adapter.place(request, now_attempt())
        assert isinstance(answer, Rejected), (request, answer)
        assert answer.reason is reason, (request, answer)
    assert venue.orders() == []
    accepted(adapter.place(limit("N8", Side.BUY, "0.01", "40000.05"), now_attempt()))
    assert [o["client_order_id"] for o in venue.orders()] == ["N8"]


def test_late_or_early_attempt_is_refused_by_the_venue_and_nothing_is_placed(
    adapter: VenueAdapter, venue: VenueProcess
) -> None:
    now = time.time_ns() // 1_000_000
    late = adapter.place(market("T1"), Attempt(now - 6_000, 5_000))
    assert isinstance(late, Rejected) and late.reason is RejectReason.OUTSIDE_RECV_WINDOW, late
    early = adapter.place(market("T1"), Attempt(now + 5_000, 5_000))
    assert isinstance(early, Rejected) and early.reason is RejectReason.OUTSIDE_RECV_WINDOW
    assert venue.orders() == []
    query = adapter.query("BTCUSDT", "T1", Attempt(now - 6_000, 5_000))
    assert isinstance(query, Unknown) and query.reason is UnknownReason.QUERY_REFUSED
    assert isinstance(adapter.place(market("T1"), Attempt(now - 6_000, 60_000)), Accepted)


@pytest.mark.parametrize("kind", ADAPTERS)
def test_wrong_credentials_are_rejected_unauthorized(kind: str, venue: VenueProcess) -> None:
    bad_secret: VenueAdapter
    bad_key: VenueAdapter
    if kind == "binance":
        bad_secret = BinanceSpotClient(venue.base_url, API_KEY, "wrong")
        bad_key = BinanceSpotClient(venue.base_url, "nobody", "wrong")
    else:
        bad_secret = PaperVenueClient(venue.base_url, API_KEY, "wrong")
        bad_key = PaperVenueClient(venue.base_url, "nobody", "wrong")
    for client in (bad_secret, bad_key):
        answer = client.place(market("U1"), now_attempt())
        assert isinstance(answer, Rejected) and answer.reason is RejectReason.UNAUTHORIZED, answer
        assert isinstance(client.query("BTCUSDT", "U1", now_attempt()), Unknown)
        client.close()
    assert venue.orders() == []


def test_client_id_is_unique_among_open_orders_only(
    adapter: VenueAdapter, venue: VenueProcess
) -> None:
    first = accepted(adapter.place(limit("D1", Side.BUY, "0.01", "40000.00"), now_attempt()))
    duplicate = adapter.place(market("D1"), now_attempt())
    assert isinstance(duplicate, Rejected)
    assert duplicate.reason is RejectReason.DUPLICATE_CLIENT_ORDER_ID
    accepted(adapter.cancel("BTCUSDT", "D1", now_attempt()))
    second = accepted(adapter.place(market("D1"), now_attempt()))
    third = accepted(adapter.place(market("D1"), now_attempt()))  # the hazard: a second fill
    assert len({first.venue_order_id, second.venue_order_id, third.venue_order_id}) == 3
    newest = accepted(adapter.query("BTCUSDT", "D1", now_attempt()))
    assert newest.venue_order_id == third.venue_order_id
    orders = venue.orders("D1")
    assert [o["status"] for o in orders] == ["canceled", "filled", "filled"]
    counts = venue.admin_ok("GET", "/paper/v1/orders")["count_by_client_order_id"]
    assert counts == {"D1": 3}


@pytest.mark.parametrize("kind", ADAPTERS)
def test_an_unreachable_venue_is_not_sent_for_orders_and_unknown_for_queries(kind: str) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    client: VenueAdapter = (
        BinanceSpotClient(url, "k", "s") if kind == "binance" else PaperVenueClient(url, "k", "s")
    )
    placed = client.place(market("Z1"), now_attempt())
    assert isinstance(placed, Rejected) and placed.reason is RejectReason.NOT_SENT
    queried = client.query("BTCUSDT", "Z1", now_attempt())
    assert isinstance(queried, Unknown) and queried.reason is UnknownReason.CONNECTION
    assert isinstance(client.exposure("BTCUSDT", now_attempt()), Unknown)


def test_fills_are_typed_decimal(adapter: VenueAdapter) -> None:
    order = accepted(adapter.place(market("P1", qty="0.12345"), now_attempt()))
    assert order.fills is not None
    [fill] = order.fills
    assert isinstance(fill, Fill)
    assert all(isinstance(v, Decimal) for v in (fill.price, fill.quantity, fill.commission))
    assert fill.quantity * fill.price == order.cumulative_quote_quantity
