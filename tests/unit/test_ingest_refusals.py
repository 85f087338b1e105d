"""The webhook refuses what admission would reject, naming the field, and produces nothing.

Same in-memory directory, sink and outcome source as ``test_ingest_app.py``; the clock is a
minute after candle A closed (12:01).
"""

from __future__ import annotations

from dataclasses import replace

import orjson
import pytest

from consumers.ingest.settings import IngestSettings
from streams.core.limits import MAX_PAYLOAD_BYTES
from tests.unit.test_ingest_app import BREAKOUT, NOW_MS, PAYLOAD, Harness, assert_error, post, run

AFTER_CLOSE = NOW_MS + 60_000
SCOPED = replace(BREAKOUT, scope_fields=("account", "instrument", "side"))


def at(h: Harness, now_ms: int = AFTER_CLOSE) -> None:
    h.clock[0] = now_ms


def test_a_future_source_time_is_422_naming_the_field() -> None:
    async def scenario(h: Harness) -> None:
        at(h)
        for candle_open in ("2026-11-30T13:00:00Z", "2030-01-01T00:00:00Z"):
            body = orjson.dumps({**PAYLOAD, "candle_open": candle_open})
            status, answer, _ = await post(h, body)
            assert status == 422, answer
            [problem] = assert_error(answer, "source_time_in_future")
            assert problem["field"] == "candle_open"
            assert "250ms" in problem["message"]
        assert h.sink.sent == []
        status, _, _ = await post(h)  # the same candle, once it has closed: accepted
        assert status == 202

    run(scenario)


def test_a_source_time_before_2000_is_422_naming_the_field() -> None:
    async def scenario(h: Harness) -> None:
        at(h)
        body = orjson.dumps({**PAYLOAD, "candle_open": "1999-06-01T00:00:00Z"})
        status, answer, _ = await post(h, body)
        assert status == 422
        [problem] = assert_error(answer, "invalid_identity")
        assert problem["field"] == "candle_open"
        assert h.sink.sent == []

    run(scenario)


def test_a_payload_over_the_admission_limit_is_413() -> None:
    async def scenario(h: Harness) -> None:
        at(h)
        body = orjson.dumps({**PAYLOAD, "note": "x" * MAX_PAYLOAD_BYTES})
        status, answer, _ = await post(h, body)
        assert status == 413
        [problem] = assert_error(answer, "payload_too_large")
        assert str(MAX_PAYLOAD_BYTES) in problem["message"]
        assert h.sink.sent == []

    # The body limit is raised above the admission limit: the admission limit still holds.
    run(scenario, limits=IngestSettings(max_body_bytes=4 * 65_536))


BASE = orjson.dumps(PAYLOAD)[:-1]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (BASE + b',"instrument":"ETHUSDT"}', "instrument"),
        (BASE + b',"extra":{"limit":1,"limit":2}}', "extra.limit"),
        (BASE + b',"inst\\u0072ument":"ETHUSDT"}', "instrument"),  # same key, escaped
    ],
)
@pytest.mark.parametrize("content_type", ["application/json", "text/plain"])
def test_duplicate_json_keys_are_422_and_nothing_is_produced(
    body: bytes, field: str, content_type: str
) -> None:
    async def scenario(h: Harness) -> None:
        at(h)
        status, answer, _ = await post(h, body, content_type=content_type)
        assert status == 422, answer
        [problem] = assert_error(answer, "invalid_body")
        assert problem["field"] == field
        assert "more than once" in problem["message"]
        assert h.sink.sent == []

    run(scenario)


def test_a_repeated_text_key_is_422_and_nothing_is_produced() -> None:
    text = (
        b"source=tradingview venue=binance instrument=BTCUSDT interval=1 instrument=ETHUSDT "
        b"candle_open=2026-11-30T12:00:00Z rule=breakout-v1 side=buy price=97000.5"
    )

    async def scenario(h: Harness) -> None:
        at(h)
        status, answer, _ = await post(h, text, content_type="text/plain")
        assert status == 422
        [problem] = assert_error(answer, "invalid_body")
        assert problem["field"] == "instrument"
        assert h.sink.sent == []

    run(scenario)


def test_control_characters_are_422_naming_the_field() -> None:
    async def scenario(h: Harness) -> None:
        at(h)
        body = orjson.dumps({**PAYLOAD, "instrument": "BTC\u0000USDT", "side": "buy\u0007"})
        status, answer, _ = await post(h, body)
        assert status == 422
        problems = assert_error(answer, "invalid_identity")
        assert sorted(p["field"] for p in problems) == ["instrument", "side"]
        assert all("control character" in p["message"] for p in problems)
        assert h.sink.sent == []

    run(scenario)


def test_a_missing_scope_field_is_reported_as_a_scope_field() -> None:
    async def scenario(h: Harness) -> None:
        at(h)
        body = orjson.dumps({k: v for k, v in PAYLOAD.items() if k not in ("account", "venue")})
        status, answer, _ = await post(h, body)
        assert status == 422
        problems = {p["field"]: p["message"] for p in assert_error(answer, "invalid_identity")}
        assert set(problems) == {"venue", "account"}
        assert "decision scope" in problems["account"]
        assert "identif" not in problems["account"]
        assert "identif" in problems["venue"]
        assert h.sink.sent == []

    run(scenario, workflows=(SCOPED,))


def test_a_body_without_source_is_422_naming_source() -> None:
    async def scenario(h: Harness) -> None:
        at(h)
        body = orjson.dumps({k: v for k, v in PAYLOAD.items() if k != "source"})
        status, answer, _ = await post(h, body)
        assert status == 422
        [problem] = assert_error(answer, "invalid_identity")
        assert problem["field"] == "source"
        assert h.sink.sent == []

    run(scenario)


def test_tradingview_interval_spellings_share_the_admission_key() -> None:
    async def scenario(h: Harness) -> None:
        at(h)
        keys = set()
        for interval, venue in (("1", "BINANCE"), ("1m", "binance"), ("60s", "Binance")):
            body = orjson.dumps({**PAYLOAD, "interval": interval, "venue": venue})
            status, answer, _ = await post(h, body)
            assert status == 202, answer
            keys.add(answer["admission_key"])
        assert keys == {
            "btc-breakout/paper/tradingview/d:binance|BTCUSDT|1m|1796040000000|breakout-v1"
        }

    run(scenario)
