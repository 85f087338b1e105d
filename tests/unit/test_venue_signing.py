"""Request signing and timing, against Binance's documented examples.

Binance's "SIGNED Endpoint Examples for POST /api/v3/order" give an API secret, a payload and the
HMAC-SHA256 signature of it; the adapter's signer and the paper venue's verifier must both agree
with them, including the non-ASCII (percent-encoded) example and the older mixed query-string +
body example (the two parts are concatenated without a separator).
"""

from __future__ import annotations

import pytest

from consumers.paper_venue.binance_params import signature_payload
from consumers.paper_venue.errors import Refusal
from consumers.paper_venue.signing import (
    MSG_AHEAD,
    MSG_OUTSIDE_WINDOW,
    Window,
    hmac_hex,
    parse_window,
    signature_matches,
)
from consumers.venue.binance_spot import sign

SECRET = "NhqPtmdSJYdKjVHjA7PZj4Mge3R5YNiP1e3UZjInClVN65XAbvqqM6A7H5fATj0j"
ASCII_PAYLOAD = (
    "symbol=LTCBTC&side=BUY&type=LIMIT&timeInForce=GTC&quantity=1&price=0.1"
    "&recvWindow=5000&timestamp=1499827319559"
)
ASCII_SIGNATURE = "c8db56825ae71d6d79447849e617115f4a920fa2acdcab2b053c4b2838bd6b71"
NON_ASCII_PAYLOAD = (
    "symbol=%EF%BC%91%EF%BC%92%EF%BC%93%EF%BC%94%EF%BC%95%EF%BC%96&side=BUY&type=LIMIT"
    "&timeInForce=GTC&quantity=1&price=0.1&recvWindow=5000&timestamp=1499827319559"
)
NON_ASCII_SIGNATURE = "e1353ec6b14d888f1164ae9af8228a3dbd508bc82eb867db8ab6046442f33ef3"
MIXED_QUERY = "symbol=LTCBTC&side=BUY&type=LIMIT&timeInForce=GTC"
MIXED_BODY = "quantity=1&price=0.1&recvWindow=5000&timestamp=1499827319559"
MIXED_SIGNATURE = "0fd168b8ddb4876a0358a8d14d0c9f3da0e9b20c5d52b2a00fcf7d1c602f9a77"


@pytest.mark.parametrize(
    ("payload", "signature"),
    [(ASCII_PAYLOAD, ASCII_SIGNATURE), (NON_ASCII_PAYLOAD, NON_ASCII_SIGNATURE)],
    ids=["ascii", "percent-encoded"],
)
def test_adapter_and_venue_reproduce_binance_documented_signatures(
    payload: str, signature: str
) -> None:
    assert sign(SECRET, payload) == signature
    assert hmac_hex(SECRET, payload) == signature
    assert signature_matches(SECRET, payload, signature)


def test_mixed_query_and_body_are_concatenated_without_separator() -> None:
    body = f"{MIXED_BODY}&signature={MIXED_SIGNATURE}"
    payload = signature_payload(MIXED_QUERY, body)
    assert payload == MIXED_QUERY + MIXED_BODY
    assert signature_matches(SECRET, payload, MIXED_SIGNATURE)


def test_signature_is_removed_wherever_it_is_and_compared_in_any_case() -> None:
    query = f"signature={ASCII_SIGNATURE.upper()}&{ASCII_PAYLOAD}"
    payload = signature_payload(query, "")
    assert payload == ASCII_PAYLOAD
    assert signature_matches(SECRET, payload, ASCII_SIGNATURE.upper())


def test_a_changed_payload_or_secret_does_not_match() -> None:
    assert not signature_matches(SECRET, ASCII_PAYLOAD.replace("0.1", "0.2"), ASCII_SIGNATURE)
    assert not signature_matches(SECRET[:-1], ASCII_PAYLOAD, ASCII_SIGNATURE)
    assert not signature_matches(SECRET, ASCII_PAYLOAD, "not-hex-é")


NOW_US = 1_800_000_000_000_000


@pytest.mark.parametrize(
    ("age_us", "window_ms", "refused_with"),
    [
        (0, 5000, None),
        (5_000_000, 5000, None),  # exactly the window: still accepted
        (5_000_001, 5000, MSG_OUTSIDE_WINDOW),
        (59_999_000, 60000, None),
        (-999_999, 5000, None),  # up to 1 s early is tolerated
        (-1_000_000, 5000, MSG_AHEAD),
    ],
)
def test_window_rule_is_binances(age_us: int, window_ms: int, refused_with: str | None) -> None:
    window = Window(NOW_US - age_us, window_ms * 1000)
    if refused_with is None:
        window.check(NOW_US)
        return
    with pytest.raises(Refusal) as refused:
        window.check(NOW_US)
    assert (refused.value.code, refused.value.msg, refused.value.status) == (
        -1021,
        refused_with,
        400,
    )


def test_window_parsing_defaults_microseconds_and_limits() -> None:
    assert parse_window("1499827319559", None) == Window(1_499_827_319_559_000, 5_000_000)
    assert parse_window("1499827319559123", "6000.346") == Window(1_499_827_319_559_123, 6_000_346)
    assert parse_window("1499827319559", "60000").window_us == 60_000_000
    for bad in ("60000.001", "70000"):
        with pytest.raises(Refusal) as refused:
            parse_window("1499827319559", bad)
        assert refused.value.code == -1102
        assert "Cannot be greater than 60000" in refused.value.msg
    for bad_ts, bad_window in (
        ("", None),
        ("12a", None),
        (None, None),
        ("1", "0"),
        ("1", "1.0001"),
    ):
        with pytest.raises(Refusal) as refused:
            parse_window(bad_ts, bad_window)
        assert refused.value.code == -1102
