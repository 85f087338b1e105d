"""The one intake step of the front doors (streams.core.intake): payload -> delivery or refusal."""

from __future__ import annotations

import orjson
import pytest

from schemas.commands import AdmitDelivery
from streams.core.errors import FieldRole, Refusal
from streams.core.intake import DuplicateKey, intake, parse_json_object
from tests.support.core import MINUTE, T0, candle, workflow

NOW = T0 + 2 * MINUTE


def take(payload: dict[str, object], channel: str = "http") -> AdmitDelivery | Refusal:
    return intake(
        payload, workflow(), delivery_id="d-1", received_at_ms=NOW, channel=channel, now_ms=NOW
    )


def test_every_door_gets_the_same_delivery_token_removed_and_near_misses_mapped() -> None:
    body = candle()
    webhook = take(dict(body, token="secret"), "http")
    publish = take(
        {("Instrument" if k == "instrument" else k): v for k, v in body.items()}, "publish"
    )
    assert isinstance(webhook, AdmitDelivery) and isinstance(publish, AdmitDelivery)
    assert (webhook.admission_key, webhook.payload_json) == (
        publish.admission_key,
        publish.payload_json,
    )
    assert "token" not in orjson.loads(webhook.payload_json)
    assert (webhook.channel, publish.channel) == ("http", "publish")


def test_an_exact_name_wins_over_a_near_miss_which_is_kept_as_given() -> None:
    taken = take(dict(candle(), Instrument="ETHUSDT"))
    assert isinstance(taken, AdmitDelivery)
    payload = orjson.loads(taken.payload_json)
    assert (payload["instrument"], payload["Instrument"]) == ("BTCUSDT", "ETHUSDT")


def test_a_refusal_is_structured_each_problem_with_field_role_and_message() -> None:
    body = {k: v for k, v in candle().items() if k not in ("venue", "account")}
    refused = take(body)
    assert isinstance(refused, Refusal)
    assert refused.reason == "missing_identity_fields"
    assert [(p.field, p.role, p.message) for p in refused.problems] == [
        ("venue", FieldRole.IDENTITY, "missing"),
        ("account", FieldRole.SCOPE, "missing"),
    ]


@pytest.mark.parametrize(
    ("payload", "reason", "field", "role"),
    [
        (
            candle("2030-01-01T00:00:00Z"),
            "source_time_in_future",
            "candle_open",
            FieldRole.SOURCE_TIME,
        ),
        (dict(candle(), note="x" * 70_000), "payload_too_large", "payload", FieldRole.PAYLOAD),
        (candle(interval="fortnight"), "invalid_field", "interval", FieldRole.SOURCE_TIME),
    ],
)
def test_content_refusals_name_their_field(
    payload: dict[str, object], reason: str, field: str, role: FieldRole
) -> None:
    refused = take(payload)
    assert isinstance(refused, Refusal)
    assert (refused.reason, refused.problems[0].field, refused.problems[0].role) == (
        reason,
        field,
        role,
    )


def test_json_with_a_key_given_twice_anywhere_is_refused_naming_it() -> None:
    with pytest.raises(DuplicateKey) as info:
        parse_json_object('{"a": {"b": 1, "b": 2}}')
    assert info.value.path == "a.b"
    assert parse_json_object('{"a": 1}') == {"a": 1}
