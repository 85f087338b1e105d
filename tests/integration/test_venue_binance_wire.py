"""The paper venue speaks Binance Spot's wire format and error codes (hand-signed requests)."""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.venue import CONFIG, VenueProcess, running_venue

# Binance's documented example credentials and request ("SIGNED Endpoint Examples").
DOC_KEY = "vmPUZE6mv9SD5VNHk4HlWFsOr6aKE2zvsw0MuIgwCIPy6utIco14y7Ju91duEh8A"
DOC_SECRET = "NhqPtmdSJYdKjVHjA7PZj4Mge3R5YNiP1e3UZjInClVN65XAbvqqM6A7H5fATj0j"
DOC_QUERY = (
    "symbol=LTCBTC&side=BUY&type=LIMIT&timeInForce=GTC&quantity=1&price=0.1&recvWindow=5000"
    "&timestamp=1499827319559&signature=c8db56825ae71d6d79447849e617115f4a920fa2acdcab2b053c4b2838bd6b71"
)
WIRE_CONFIG = (
    CONFIG
    + f"""
[[accounts]]
name = "doc"
api_key = "{DOC_KEY}"
api_secret = "{DOC_SECRET}"
"""
)
BUY = [("symbol", "BTCUSDT"), ("side", "BUY"), ("type", "MARKET"), ("quantity", "0.01")]


@pytest.fixture(scope="module")
def venue_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VenueProcess]:
    with running_venue(tmp_path_factory.mktemp("venue"), WIRE_CONFIG) as venue:
        yield venue


@pytest.fixture
def venue(venue_process: VenueProcess) -> VenueProcess:
    venue_process.reset()
    return venue_process


def error(answer: tuple[int, Any]) -> tuple[int, int]:
    status, body = answer
    assert set(body) == {"code", "msg"}, body
    return status, body["code"]


def test_binances_documented_request_passes_its_signature_check(venue: VenueProcess) -> None:
    status, body = venue._http(
        "POST", f"/api/v3/order?{DOC_QUERY}", None, {"X-MBX-APIKEY": DOC_KEY}, 10
    )
    # The signature is right; the 2017 timestamp is then refused, exactly as Binance would.
    assert (status, body) == (
        400,
        {"code": -1021, "msg": "Timestamp for this request is outside of the recvWindow."},
    )
    tampered = DOC_QUERY.replace("price=0.1", "price=0.2")
    status, body = venue._http(
        "POST", f"/api/v3/order?{tampered}", None, {"X-MBX-APIKEY": DOC_KEY}, 10
    )
    assert (status, body) == (
        400,
        {"code": -1022, "msg": "Signature for this request is not valid."},
    )


def test_response_types_ack_result_full(venue: VenueProcess) -> None:
    ack = venue.binance_raw("POST", "/api/v3/order", [*BUY, ("newOrderRespType", "ACK")])[1]
    assert set(ack) == {"symbol", "orderId", "orderListId", "clientOrderId", "transactTime"}
    assert len(ack["clientOrderId"]) == 22  # generated when not sent
    result = venue.binance_raw("POST", "/api/v3/order", [*BUY, ("newOrderRespType", "RESULT")])[1]
    assert "fills" not in result and result["status"] == "FILLED"
    assert result["cummulativeQuoteQty"] == "500.00000000"
    full = venue.binance_raw("POST", "/api/v3/order", BUY)[1]  # FULL is the default
    assert list(full) == [
        "symbol",
        "orderId",
        "orderListId",
        "clientOrderId",
        "transactTime",
        "price",
        "origQty",
        "executedQty",
        "origQuoteOrderQty",
        "cummulativeQuoteQty",
        "status",
        "timeInForce",
        "type",
        "side",
        "workingTime",
        "selfTradePreventionMode",
        "fills",
    ]
    assert full["fills"] == [
        {
            "price": "50000.00000000",
            "qty": "0.01000000",
            "commission": "0.00002000",
            "commissionAsset": "BTC",
            "tradeId": full["fills"][0]["tradeId"],
        }
    ]
    assert full["orderListId"] == -1 and full["price"] == "0.00000000"


def test_query_open_orders_trades_and_account_shapes(venue: VenueProcess) -> None:
    placed = venue.binance_raw("POST", "/api/v3/order", [*BUY, ("newClientOrderId", "W1")])[1]
    order = venue.binance_raw(
        "GET", "/api/v3/order", [("symbol", "BTCUSDT"), ("origClientOrderId", "W1")]
    )[1]
    assert order["orderId"] == placed["orderId"] and order["isWorking"] is True
    assert {"time", "updateTime", "stopPrice", "icebergQty"} <= set(order)
    trades = venue.binance_raw(
        "GET", "/api/v3/myTrades", [("symbol", "BTCUSDT"), ("orderId", str(placed["orderId"]))]
    )[1]
    assert [(t["orderId"], t["qty"], t["isBuyer"], t["isMaker"]) for t in trades] == [
        (placed["orderId"], "0.01000000", True, False)
    ]
    account = venue.binance_raw("GET", "/api/v3/account", [("omitZeroBalances", "true")])[1]
    assert account["accountType"] == "SPOT" and account["canTrade"] is True
    assert account["balances"] == [
        {"asset": "BTC", "free": "2.00998000", "locked": "0.00000000"},
        {"asset": "USDT", "free": "99500.00000000", "locked": "0.00000000"},
    ]
    assert venue.binance_raw("GET", "/api/v3/openOrders", [])[1] == []


def test_public_endpoints(venue: VenueProcess) -> None:
    assert venue._http("GET", "/api/v3/ping", None, {}, 5) == (200, {})
    status, body = venue._http("GET", "/api/v3/time", None, {}, 5)
    assert status == 200 and abs(body["serverTime"] - time.time() * 1000) < 60_000
    status, info = venue._http("GET", "/api/v3/exchangeInfo?symbol=BTCUSDT", None, {}, 5)
    [symbol] = info["symbols"]
    assert (symbol["baseAsset"], symbol["quoteAsset"]) == ("BTC", "USDT")
    lot = next(f for f in symbol["filters"] if f["filterType"] == "LOT_SIZE")
    assert lot["stepSize"] == "0.00001000"
    assert venue._http("GET", "/api/v3/ticker/price?symbol=BTCUSDT", None, {}, 5) == (
        200,
        {"symbol": "BTCUSDT", "price": "50000.00000000"},
    )
    assert error(venue._http("GET", "/api/v3/exchangeInfo?symbol=NOPE", None, {}, 5)) == (
        400,
        -1121,
    )


def test_error_codes_and_statuses(venue: VenueProcess) -> None:
    raw = venue.binance_raw
    q = [("symbol", "BTCUSDT")]
    expectations: list[tuple[tuple[int, Any], tuple[int, int]]] = [
        (raw("GET", "/api/v3/order", [*q, ("origClientOrderId", "none")]), (400, -2013)),
        (raw("DELETE", "/api/v3/order", [*q, ("origClientOrderId", "none")]), (400, -2011)),
        (raw("POST", "/api/v3/order", BUY, key=None), (401, -2014)),
        (raw("POST", "/api/v3/order", BUY, key="nobody"), (401, -2015)),
        (raw("POST", "/api/v3/order", BUY, sign=False), (400, -1102)),
        (raw("POST", "/api/v3/order", BUY, secret="wrong"), (400, -1022)),
        (raw("POST", "/api/v3/order", BUY, recv_window="60001"), (400, -1102)),
        (
            raw("POST", "/api/v3/order", BUY, timestamp_ms=int(time.time() * 1000) - 10_000),
            (400, -1021),
        ),
        (
            raw("POST", "/api/v3/order", BUY, timestamp_ms=int(time.time() * 1000) + 5_000),
            (400, -1021),
        ),
        (raw("POST", "/api/v3/order", [("symbol", "NOPE"), *BUY[1:]]), (400, -1121)),
        (raw("POST", "/api/v3/order", [*q, ("side", "HOLD"), *BUY[2:]]), (400, -1117)),
        (
            raw("POST", "/api/v3/order", [*q, ("side", "BUY"), ("type", "ICEBERG"), BUY[3]]),
            (400, -1116),
        ),
        (
            raw("POST", "/api/v3/order", [*q, ("side", "BUY"), ("type", "STOP_LOSS"), BUY[3]]),
            (400, -2010),
        ),
        (
            raw(
                "POST",
                "/api/v3/order",
                [*q, ("side", "BUY"), ("type", "LIMIT"), BUY[3], ("price", "1")],
            ),
            (400, -1102),
        ),
        (
            raw(
                "POST",
                "/api/v3/order",
                [
                    *q,
                    ("side", "BUY"),
                    ("type", "LIMIT"),
                    BUY[3],
                    ("price", "1"),
                    ("timeInForce", "DAY"),
                ],
            ),
            (400, -1115),
        ),
        (raw("POST", "/api/v3/order", [*BUY, ("timeInForce", "GTC")]), (400, -1114)),
        (raw("POST", "/api/v3/order", [*BUY, ("price", "1")]), (400, -1106)),
        (raw("POST", "/api/v3/order", [*BUY, ("quoteOrderQty", "10")]), (400, -1106)),
        (raw("POST", "/api/v3/order", [*BUY[:3], ("quantity", "0.000000001")]), (400, -1111)),
        (raw("POST", "/api/v3/order", [*BUY[:3], ("quantity", "1e-3")]), (400, -1100)),
        (raw("POST", "/api/v3/order", [*BUY, ("newClientOrderId", "has space")]), (400, -1100)),
        (raw("POST", "/api/v3/order", [*BUY, ("newClientOrderId", "")]), (400, -1118)),
        (raw("POST", "/api/v3/order", [*BUY, ("newOrderRespType", "ALL")]), (400, -1130)),
        (raw("POST", "/api/v3/order", [*BUY, ("icebergQty", "1")]), (400, -1104)),
        (raw("POST", "/api/v3/order", [*BUY, ("quantity", "0.02")]), (400, -1101)),
        (raw("POST", "/api/v3/order", [*BUY[:3], ("quantity", "100")]), (400, -2010)),
        (raw("POST", "/api/v3/order", [*BUY[:3], ("quantity", "0.00001")]), (400, -1013)),
        (raw("GET", "/api/v3/nothing", []), (404, -1020)),
    ]
    for answer, expected in expectations:
        assert error(answer) == expected, answer
    assert venue.orders() == []
    assert raw("POST", "/api/v3/order", BUY, recv_window="60000")[0] == 200


def test_parameters_in_the_body_and_mixed_with_the_query_string(venue: VenueProcess) -> None:
    assert (
        venue.binance_raw(
            "POST", "/api/v3/order", [*BUY, ("newClientOrderId", "B1")], in_body=True
        )[0]
        == 200
    )
    query = "symbol=BTCUSDT&side=BUY&type=MARKET"
    body = f"quantity=0.01&newClientOrderId=B2&timestamp={int(time.time() * 1000)}"
    signature = hmac.new(b"alice-secret", (query + body).encode(), hashlib.sha256).hexdigest()
    status, answer = venue._http(
        "POST",
        f"/api/v3/order?{query}",
        f"{body}&signature={signature}".encode(),
        {"X-MBX-APIKEY": "alice-key", "Content-Type": "application/x-www-form-urlencoded"},
        10,
    )
    assert (status, answer["clientOrderId"]) == (200, "B2")
    # A parameter in both places is taken from the query string.
    query = "symbol=BTCUSDT&side=BUY&type=MARKET&quantity=0.02"
    body = f"quantity=0.01&newClientOrderId=B3&timestamp={int(time.time() * 1000)}"
    signature = hmac.new(b"alice-secret", (query + body).encode(), hashlib.sha256).hexdigest()
    status, answer = venue._http(
        "POST",
        f"/api/v3/order?{query}",
        f"{body}&signature={signature}".encode(),
        {"X-MBX-APIKEY": "alice-key", "Content-Type": "application/x-www-form-urlencoded"},
        10,
    )
    assert (status, answer["origQty"]) == (200, "0.02000000")


def test_accounts_are_separate(venue: VenueProcess) -> None:
    def bob(method: str, params: list[tuple[str, str]]) -> tuple[int, Any]:
        return venue.binance_raw(
            method, "/api/v3/order", params, key="bob-key", secret="bob-secret"
        )

    more = [*BUY[:3], ("quantity", "0.011")]  # 550 USDT; bob has 500
    assert error(bob("POST", more)) == (400, -2010)
    small = [*BUY[:3], ("quantity", "0.009"), ("newClientOrderId", "same")]
    assert bob("POST", small)[0] == 200
    assert (
        venue.binance_raw("POST", "/api/v3/order", [*BUY, ("newClientOrderId", "same")])[0] == 200
    )
    alices = venue.orders("same")[1]["venue_order_id"]
    assert error(bob("GET", [("symbol", "BTCUSDT"), ("orderId", alices)])) == (400, -2013)
    assert {o["account"] for o in venue.orders("same")} == {"alice", "bob"}
