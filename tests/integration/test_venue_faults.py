"""Each fault mode gives the typed answer it must, through both adapters, on a real venue."""

from __future__ import annotations

import time
from collections.abc import Iterator
from decimal import Decimal

import pytest

from consumers.venue.adapter import (
    Accepted,
    NotFound,
    OpenOrders,
    OrderRequest,
    OrderStatus,
    OrderType,
    Rejected,
    RejectReason,
    Side,
    Unknown,
    UnknownReason,
    VenueAdapter,
)
from tests.support.venue import CONFIG, VenueProcess, now_attempt, running_venue

D = Decimal
ADAPTERS = ["binance", "paper"]


@pytest.fixture(params=ADAPTERS)
def adapter(request: pytest.FixtureRequest, venue: VenueProcess) -> Iterator[VenueAdapter]:
    client = venue.adapter(request.param, read_timeout_s=1.0)
    yield client
    client.close()


def market(cid: str, qty: str = "0.01") -> OrderRequest:
    return OrderRequest("BTCUSDT", Side.BUY, OrderType.MARKET, cid, quantity=D(qty))


def resting(cid: str) -> OrderRequest:
    return OrderRequest("BTCUSDT", Side.BUY, OrderType.LIMIT, cid, D("0.01"), None, D("40000.00"))


def unknown(answer: object, reason: UnknownReason) -> Unknown:
    assert isinstance(answer, Unknown), answer
    assert answer.reason is reason, answer
    return answer


def test_drop_after_accepting_is_unknown_and_the_order_exists(
    adapter: VenueAdapter, venue: VenueProcess
) -> None:
    venue.fault(action="drop", client_order_id="E1")
    unknown(adapter.place(market("E1"), now_attempt()), UnknownReason.CONNECTION)
    found = adapter.query("BTCUSDT", "E1", now_attempt())  # the same adapter reconnects
    assert isinstance(found, Accepted) and found.status is OrderStatus.FILLED
    assert len(venue.orders("E1")) == 1


def test_answer_held_past_the_client_timeout_is_unknown_and_the_order_exists(
    adapter: VenueAdapter, venue: VenueProcess
) -> None:
    venue.fault(action="hold", client_order_id="H1", hold_ms=3000)
    unknown(adapter.place(market("H1"), now_attempt()), UnknownReason.TIMEOUT)
    found = adapter.query("BTCUSDT", "H1", now_attempt())
    assert isinstance(found, Accepted) and found.is_filled


def test_5xx_after_accepting_is_unknown_and_the_order_exists(
    adapter: VenueAdapter, venue: VenueProcess
) -> None:
    venue.fault(action="error", accept=True, client_order_id="X1")
    answer = unknown(adapter.place(market("X1"), now_attempt()), UnknownReason.SERVER_ERROR)
    assert answer.http_status == 503
    assert answer.code in (-1007, "outcome_unknown")
    assert isinstance(adapter.query("BTCUSDT", "X1", now_attempt()), Accepted)


def test_5xx_without_accepting_is_unknown_and_nothing_exists(
    adapter: VenueAdapter, venue: VenueProcess
) -> None:
    venue.fault(action="error", accept=False, status=500, client_order_id="X2")
    unknown(adapter.place(market("X2"), now_attempt()), UnknownReason.SERVER_ERROR)
    assert isinstance(adapter.query("BTCUSDT", "X2", now_attempt()), NotFound)
    assert venue.orders("X2") == []


def test_quiet_period_says_not_found_until_it_passes_then_filled(
    adapter: VenueAdapter, venue: VenueProcess
) -> None:
    quiet_s = 3.0
    venue.fault(action="drop", client_order_id="Q1", quiet_ms=int(quiet_s * 1000))
    started = time.monotonic()
    unknown(adapter.place(market("Q1"), now_attempt()), UnknownReason.CONNECTION)
    early = adapter.query("BTCUSDT", "Q1", now_attempt())
    if time.monotonic() - started >= quiet_s:
        pytest.skip("the machine took longer than the quiet period to ask")
    assert isinstance(early, NotFound), early
    answers: list[str] = []
    deadline = started + quiet_s + 20
    while time.monotonic() < deadline:
        answer = adapter.query("BTCUSDT", "Q1", now_attempt())
        answers.append(type(answer).__name__)
        if isinstance(answer, Accepted):
            assert answer.is_filled
            assert time.monotonic() - started >= quiet_s - 0.05  # not before the quiet period
            break
        assert isinstance(answer, NotFound), answer
        time.sleep(0.2)
    assert answers[-1] == "Accepted", answers
    [order] = venue.orders("Q1")
    assert order["visible_from_ms"] - order["created_at_ms"] == quiet_s * 1000


def test_not_found_fault_hides_a_resting_order_from_queries_and_open_orders(
    adapter: VenueAdapter, venue: VenueProcess
) -> None:
    venue.fault(action="not_found", client_order_id="Q2", quiet_ms=60_000)
    placed = adapter.place(resting("Q2"), now_attempt())
    assert isinstance(placed, Accepted) and placed.status is OrderStatus.NEW
    assert isinstance(adapter.query("BTCUSDT", "Q2", now_attempt()), NotFound)
    listed = adapter.open_orders("BTCUSDT", now_attempt())
    assert isinstance(listed, OpenOrders) and listed.orders == ()
    again = adapter.place(resting("Q2"), now_attempt())  # the matching engine knows it
    assert isinstance(again, Rejected)
    assert again.reason is RejectReason.DUPLICATE_CLIENT_ORDER_ID
    assert [o["status"] for o in venue.orders("Q2")] == ["new"]


def test_reject_fault_places_nothing(adapter: VenueAdapter, venue: VenueProcess) -> None:
    venue.fault(action="reject", client_order_id="R1")
    answer = adapter.place(market("R1"), now_attempt())
    assert isinstance(answer, Rejected), answer
    expected = {
        "binance-spot": RejectReason.INSUFFICIENT_BALANCE,
        "paper": RejectReason.ORDER_REJECTED,
    }
    assert answer.reason is expected[adapter.name]
    assert venue.orders("R1") == []
    assert isinstance(adapter.place(market("R1"), now_attempt()), Accepted)  # count 1: used up


def test_rate_limit_reject_is_rejected_rate_limited_on_binance(venue: VenueProcess) -> None:
    venue.fault(action="reject", status=429, code=-1003, msg="Too many requests queued.")
    client = venue.adapter("binance")
    answer = client.place(market("R2"), now_attempt())
    assert isinstance(answer, Rejected) and answer.reason is RejectReason.RATE_LIMITED
    client.close()


def test_faults_on_queries_and_cancels(adapter: VenueAdapter, venue: VenueProcess) -> None:
    assert isinstance(adapter.place(resting("C1"), now_attempt()), Accepted)
    venue.fault(action="error", accept=False, op="query", client_order_id="C1")
    unknown(adapter.query("BTCUSDT", "C1", now_attempt()), UnknownReason.SERVER_ERROR)
    venue.fault(action="drop", op="cancel", client_order_id="C1")
    unknown(adapter.cancel("BTCUSDT", "C1", now_attempt()), UnknownReason.CONNECTION)
    after = adapter.query("BTCUSDT", "C1", now_attempt())
    assert isinstance(after, Accepted) and after.status is OrderStatus.CANCELED
    venue.fault(action="hold", op="open_orders", hold_ms=3000)
    unknown(adapter.open_orders(None, now_attempt()), UnknownReason.TIMEOUT)


def test_skip_and_count_select_which_matching_request_is_hit(
    adapter: VenueAdapter, venue: VenueProcess
) -> None:
    rule = venue.fault(action="drop", skip=1, count=1)
    assert isinstance(adapter.place(market("K1"), now_attempt()), Accepted)
    unknown(adapter.place(market("K2"), now_attempt()), UnknownReason.CONNECTION)
    assert isinstance(adapter.place(market("K3"), now_attempt()), Accepted)
    [listed] = venue.admin_ok("GET", "/paper/v1/faults")["faults"]
    assert (listed["id"], listed["matched"], listed["applied"]) == (rule["id"], 2, 1)
    assert [o["client_order_id"] for o in venue.orders()] == ["K1", "K2", "K3"]


def test_a_fault_stays_armed_when_the_venue_refuses_the_request_itself(
    adapter: VenueAdapter, venue: VenueProcess
) -> None:
    venue.fault(action="drop", client_order_id="A1")
    refused = adapter.place(market("A1", qty="100"), now_attempt())
    assert isinstance(refused, Rejected) and refused.reason is RejectReason.INSUFFICIENT_BALANCE
    unknown(adapter.place(market("A1"), now_attempt()), UnknownReason.CONNECTION)


def test_path_and_api_select_one_api(venue: VenueProcess) -> None:
    venue.fault(action="drop", path="/paper/v1/account/orders", count=None)
    binance, native = venue.adapter("binance"), venue.adapter("paper")
    assert isinstance(binance.place(market("P1"), now_attempt()), Accepted)
    unknown(native.place(market("P2"), now_attempt()), UnknownReason.CONNECTION)
    unknown(native.place(market("P3"), now_attempt()), UnknownReason.CONNECTION)
    binance.close()
    native.close()


def test_admin_api_needs_the_token_and_checks_fault_specs(venue: VenueProcess) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        status, body = venue._http("GET", "/paper/v1/orders", None, headers, 5)
        assert (status, body["error"]["code"]) == (401, "unauthorized")
    for spec, fragment in (
        ({"action": "explode"}, "'action'"),
        ({"action": "error"}, "'accept'"),
        ({"action": "error", "accept": True, "status": 404}, "5xx"),
        ({"action": "not_found"}, "quiet_ms"),
        ({"action": "drop", "count": 0}, "'count'"),
        ({"action": "drop", "colour": "red"}, "unknown field"),
    ):
        status, body = venue.admin("POST", "/paper/v1/faults", spec)
        assert status == 400 and fragment in body["error"]["message"], (spec, body)
    venue.fault(action="drop", name="once")
    status, body = venue.admin("POST", "/paper/v1/faults", {"action": "drop", "name": "once"})
    assert (status, body["error"]["code"]) == (409, "duplicate_fault")
    assert venue.admin_ok("DELETE", "/paper/v1/faults")["deleted"] == 1
    stats = venue.admin_ok("GET", "/paper/v1/stats")["requests"]
    assert any(r["op"] == "GET /paper/v1/orders" and r["outcome"] == "unauthorized" for r in stats)


def test_faults_from_the_config_file_are_armed_once(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    config = CONFIG + '\n[[faults]]\nname = "lose-K1"\naction = "drop"\nclient_order_id = "K1"\n'
    with running_venue(tmp_path_factory.mktemp("venue"), config) as venue:
        client = venue.adapter("binance")
        unknown(client.place(market("K1"), now_attempt()), UnknownReason.CONNECTION)
        venue.stop()
        venue.start()
        [rule] = venue.admin_ok("GET", "/paper/v1/faults")["faults"]
        assert (rule["name"], rule["applied"]) == ("lose-K1", 1)
        assert isinstance(client.place(market("K1"), now_attempt()), Accepted)
        assert len(venue.orders("K1")) == 2
        client.close()
