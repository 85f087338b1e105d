"""An order with more fills than one ``myTrades`` page still reports every fill.

Binance answers ``GET /api/v3/myTrades`` with at most ``limit`` trades (500 by default, 1,000
at most). A query of an order that filled in more parts than that (a large order against
many small resting ones) must page through its trades: the gateway charges the commission
listed in the fills against the executed quantity (``ActionState.net_executed``), so a list
cut short understates the fee and sizes a protective order above what the account holds.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

import pytest

from consumers.venue import binance_trades
from consumers.venue.adapter import Accepted, OrderRequest, OrderType, Side, VenueAdapter
from tests.support.venue import VenueProcess, now_attempt

pytestmark = pytest.mark.integration

D = Decimal
PARTS = 601
"""More than Binance's default page of 500, and three pages of the size set below."""


@pytest.fixture(params=["binance", "paper"])
def adapter(request: pytest.FixtureRequest, venue: VenueProcess) -> Iterator[VenueAdapter]:
    client = venue.adapter(request.param)
    yield client
    client.close()


def test_a_query_lists_every_fill_of_an_order_filled_in_more_parts_than_a_page(
    adapter: VenueAdapter, venue: VenueProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(binance_trades, "PAGE", 250)
    request = OrderRequest(
        "BTCUSDT", Side.SELL, OrderType.LIMIT, "many-parts", D("1"), None, D("51000.00")
    )
    assert isinstance(adapter.place(request, now_attempt()), Accepted)
    for _ in range(PARTS):
        venue.set_price("BTCUSDT", "51000.00", volume="0.001")
    order = adapter.query("BTCUSDT", "many-parts", now_attempt())
    assert isinstance(order, Accepted), order
    assert order.executed_quantity == D("0.601")
    assert order.fills is not None
    assert len(order.fills) == PARTS
    assert len({f.trade_id for f in order.fills}) == PARTS
    assert sum(f.quantity for f in order.fills) == order.executed_quantity
