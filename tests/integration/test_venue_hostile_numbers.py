"""Numbers the paper venue is given are ASCII digits it can hold, or the request is refused.

``str.isdigit`` says yes to ``"²"`` (which ``int`` refuses) and to any length, so a
superscript, or an id past SQLite's INTEGER (2**63 - 1), used to fail inside the handler: a
500, which a client must read as "outcome unknown" and reconcile. Each such request is a 4xx
with the API's own error shape now, and ``myTrades`` reads its ``fromId``, ``limit``,
``startTime`` and ``endTime`` strictly instead of taking a malformed one for its default.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from typing import Any
from urllib.parse import quote, urlencode

import pytest

from tests.support.venue import API_KEY, API_SECRET, VenueProcess

pytestmark = pytest.mark.integration

SUPERSCRIPT = "\u00b2"  # "²": isdigit() says yes, int() says no
PAST_SQLITE = str(2**63)  # 19 digits, one more than SQLite's largest INTEGER
HOSTILE = [SUPERSCRIPT, PAST_SQLITE, "9" * 25, "-5", "1.5", "abc", "12\n", "\uff11"]
BUY = [("symbol", "BTCUSDT"), ("side", "BUY"), ("type", "MARKET"), ("quantity", "0.01")]


def native(venue: VenueProcess, method: str, target: str) -> tuple[int, Any]:
    timestamp, window = str(time.time_ns() // 1_000_000), "5000"
    payload = f"{timestamp}\n{window}\n{method}\n{target}\n"
    headers = {
        "X-Paper-Key": API_KEY,
        "X-Paper-Timestamp": timestamp,
        "X-Paper-Window": window,
        "X-Paper-Signature": hmac.new(
            API_SECRET.encode(), payload.encode(), hashlib.sha256
        ).hexdigest(),
    }
    return venue._http(method, target, None, headers, 10)


@pytest.mark.parametrize("value", HOSTILE, ids=repr)
def test_binance_ids_and_counts_that_are_not_ascii_digits_it_holds_are_minus_1100(
    venue: VenueProcess, value: str
) -> None:
    q = [("symbol", "BTCUSDT")]
    for method, path, params in [
        ("GET", "/api/v3/order", [*q, ("orderId", value)]),
        ("DELETE", "/api/v3/order", [*q, ("orderId", value)]),
        ("GET", "/api/v3/myTrades", [*q, ("orderId", value)]),
        ("GET", "/api/v3/myTrades", [*q, ("fromId", value)]),
        ("GET", "/api/v3/myTrades", [*q, ("limit", value)]),
        ("GET", "/api/v3/myTrades", [*q, ("startTime", value)]),
        ("GET", "/api/v3/myTrades", [*q, ("endTime", value)]),
    ]:
        status, body = venue.binance_raw(method, path, params)
        name = params[-1][0]
        assert (status, body["code"]) == (400, -1100), (method, path, params, body)
        assert f"parameter '{name}'" in body["msg"]


@pytest.mark.parametrize("value", [SUPERSCRIPT, "9" * 21, "\uff11" * 13], ids=repr)
def test_a_timestamp_that_is_not_ascii_digits_is_minus_1102(
    venue: VenueProcess, value: str
) -> None:
    query = urlencode([("timestamp", value)])
    signature = hmac.new(API_SECRET.encode(), query.encode(), hashlib.sha256).hexdigest()
    status, body = venue._http(
        "GET", f"/api/v3/account?{query}&signature={signature}", None, {"X-MBX-APIKEY": API_KEY}, 10
    )
    assert (status, body["code"]) == (400, -1102), body


@pytest.mark.parametrize("value", HOSTILE, ids=repr)
def test_native_venue_order_ids_and_admin_fault_ids_are_refused_not_failed(
    venue: VenueProcess, value: str
) -> None:
    status, body = native(
        venue, "GET", f"/paper/v1/account/orders?symbol=BTCUSDT&venue_order_id={quote(value)}"
    )
    assert (status, body["error"]["code"]) == (400, "invalid_request"), body
    status, body = venue.admin("DELETE", f"/paper/v1/faults/{quote(value)}")
    assert (status, body["error"]["code"]) == (404, "not_found"), body


def test_my_trades_reads_from_id_start_time_end_time_and_limit(venue: VenueProcess) -> None:
    placed = [venue.binance_raw("POST", "/api/v3/order", BUY)[1] for _ in range(3)]
    q = [("symbol", "BTCUSDT")]

    def trades(*params: tuple[str, str]) -> list[int]:
        status, body = venue.binance_raw("GET", "/api/v3/myTrades", [*q, *params])
        assert status == 200, body
        return [t["orderId"] for t in body]

    ids = [p["orderId"] for p in placed]
    every = venue.binance_raw("GET", "/api/v3/myTrades", q)[1]
    assert [t["orderId"] for t in every] == ids
    first_time, last_time = every[0]["time"], every[-1]["time"]
    assert trades(("fromId", str(every[1]["id"]))) == ids[1:]
    # Binance: without fromId the most recent trades, with it those from fromId on.
    assert trades(("limit", "2")) == ids[1:]
    assert trades(("fromId", str(every[0]["id"])), ("limit", "2")) == ids[:2]
    assert trades(("endTime", str(last_time)), ("limit", "1")) == ids[2:]
    assert trades(("startTime", str(last_time + 1))) == []
    assert trades(("endTime", str(first_time - 1))) == []
    assert trades(("startTime", str(first_time)), ("endTime", str(last_time))) == ids
    assert venue.binance_raw("GET", "/api/v3/myTrades", [*q, ("limit", "1001")])[1]["code"] == (
        -1130
    )
