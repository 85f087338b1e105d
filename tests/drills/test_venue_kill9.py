"""kill -9 drills on the paper venue: it must keep every accepted order and every balance.

The venue stands in for an exchange that outlives the gateway, so its own crash must lose
nothing it acknowledged — and nothing it accepted without acknowledging.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest

from consumers.venue.adapter import (
    Accepted,
    NotFound,
    OrderRequest,
    OrderStatus,
    OrderType,
    PlaceAnswer,
    Side,
    TimeInForce,
    Unknown,
    UnknownReason,
)
from tests.support.venue import VenueProcess, now_attempt, running_venue

pytestmark = pytest.mark.drill
D = Decimal


@pytest.fixture
def venue(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VenueProcess]:
    with running_venue(tmp_path_factory.mktemp("venue")) as venue:
        yield venue


def limit(cid: str, side: Side, qty: str, price: str) -> OrderRequest:
    return OrderRequest(
        "BTCUSDT", side, OrderType.LIMIT, cid, D(qty), None, D(price), TimeInForce.GTC
    )


def snapshot(venue: VenueProcess) -> dict[str, Any]:
    return {
        "orders": venue.orders(),
        "trades": venue.admin_ok("GET", "/paper/v1/trades")["trades"],
        "balances": venue.admin_ok("GET", "/paper/v1/balances")["balances"],
        "prices": {
            s: p["price"] for s, p in venue.admin_ok("GET", "/paper/v1/prices")["prices"].items()
        },
        "faults": venue.admin_ok("GET", "/paper/v1/faults")["faults"],
    }


def test_kill9_and_restart_keeps_every_order_trade_balance_and_fault(venue: VenueProcess) -> None:
    binance, native = venue.adapter("binance"), venue.adapter("paper")
    market = OrderRequest("BTCUSDT", Side.BUY, OrderType.MARKET, "M1", quantity=D("0.05"))
    assert isinstance(binance.place(market, now_attempt()), Accepted)
    assert isinstance(
        native.place(limit("L1", Side.BUY, "0.1", "49000.00"), now_attempt()), Accepted
    )
    assert isinstance(
        binance.place(limit("S1", Side.SELL, "1", "51000.00"), now_attempt()), Accepted
    )
    venue.set_price("BTCUSDT", "51000.00", volume="0.25")  # S1 partially filled
    assert isinstance(
        native.place(limit("C1", Side.BUY, "0.01", "45000.00"), now_attempt()), Accepted
    )
    assert isinstance(native.cancel("BTCUSDT", "C1", now_attempt()), Accepted)
    venue.fault(action="drop", client_order_id="later", name="armed")
    before = snapshot(venue)
    assert [o["status"] for o in before["orders"]] == [
        "filled",
        "new",
        "partially_filled",
        "canceled",
    ]

    venue.kill9()
    venue.start()

    assert snapshot(venue) == before
    [fill] = venue.set_price("BTCUSDT", "48000.00")  # the resting buy still works after restart
    assert fill["order_id"] == before["orders"][1]["venue_order_id"]
    for client in (binance, native):  # the adapters' old connections died with the venue
        l1 = client.query("BTCUSDT", "L1", now_attempt())
        assert isinstance(l1, Accepted) and l1.status is OrderStatus.FILLED
        s1 = client.query("BTCUSDT", "S1", now_attempt())
        assert isinstance(s1, Accepted) and s1.executed_quantity == D("0.25")
    later = OrderRequest("BTCUSDT", Side.BUY, OrderType.MARKET, "later", quantity=D("0.01"))
    answer = binance.place(later, now_attempt())
    assert isinstance(answer, Unknown) and answer.reason is UnknownReason.CONNECTION  # still armed
    binance.close()
    native.close()


def test_an_order_accepted_while_its_answer_was_held_survives_kill9(venue: VenueProcess) -> None:
    venue.fault(action="hold", client_order_id="H1", hold_ms=60_000)
    client = venue.adapter("binance", read_timeout_s=30.0)
    answers: list[PlaceAnswer] = []
    order = OrderRequest("BTCUSDT", Side.BUY, OrderType.MARKET, "H1", quantity=D("0.01"))
    sender = threading.Thread(target=lambda: answers.append(client.place(order, now_attempt())))
    sender.start()
    deadline_orders: list[dict[str, Any]] = []
    for _ in range(200):
        deadline_orders = venue.orders("H1")
        if deadline_orders:
            break
        threading.Event().wait(0.05)
    assert [o["status"] for o in deadline_orders] == ["filled"]  # committed, answer still held
    venue.kill9()
    sender.join(30)
    [answer] = answers
    assert isinstance(answer, Unknown) and answer.reason is UnknownReason.CONNECTION
    venue.start()
    found = client.query("BTCUSDT", "H1", now_attempt())
    assert isinstance(found, Accepted) and found.is_filled
    assert venue.balances()["BTC"] == (D("2.00998"), D("0"))
    client.close()


def test_a_stale_kept_alive_connection_does_not_make_an_order_unknown(venue: VenueProcess) -> None:
    """The venue restarts between two orders on one adapter: the idle connection it closed is
    noticed before use, so the second order is placed, not reported unknown."""
    for kind in ("binance", "paper"):
        client = venue.adapter(kind)
        first = OrderRequest("BTCUSDT", Side.BUY, OrderType.MARKET, f"{kind}-1", quantity=D("0.01"))
        assert isinstance(client.place(first, now_attempt()), Accepted)
        assert venue.stop() == 0
        venue.start()
        second = OrderRequest(
            "BTCUSDT", Side.BUY, OrderType.MARKET, f"{kind}-2", quantity=D("0.01")
        )
        assert isinstance(client.place(second, now_attempt()), Accepted)
        client.close()


def test_drill_one_order_per_action_when_the_answer_is_lost(venue: VenueProcess) -> None:
    """A gateway that reconciles by client order id (instead of resending) places E1 once."""
    venue.fault(action="drop", client_order_id="E1", quiet_ms=1500)
    client = venue.adapter("binance")
    order = OrderRequest("BTCUSDT", Side.BUY, OrderType.MARKET, "E1", quantity=D("0.01"))
    assert isinstance(client.place(order, now_attempt()), Unknown)
    outcome = None
    for _ in range(200):
        outcome = client.query("BTCUSDT", "E1", now_attempt())
        if not isinstance(outcome, NotFound):
            break
        threading.Event().wait(0.05)
    assert isinstance(outcome, Accepted) and outcome.is_filled
    assert venue.admin_ok("GET", "/paper/v1/orders")["count_by_client_order_id"] == {"E1": 1}
    client.close()
