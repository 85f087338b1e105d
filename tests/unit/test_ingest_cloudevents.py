"""The webhook's CloudEvents modes (structured, batched, binary), with in-memory components.

The same harness as ``test_ingest_app.py``; the real broker and processor are in
``tests/integration/test_ingest_cloudevents.py``.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest

from consumers.ingest.answers import refused
from consumers.ingest.errors import BrokerUnavailable
from consumers.ingest.outcomes import Outcome
from streams.core.errors import Refusal
from streams.core.reasons import FRONT_DOOR_REFUSALS
from tests.unit.test_ingest_app import (
    BREAKOUT,
    NOW_MS,
    Harness,
    assert_error,
    post,
    run,
    signed_for,
)

SIGNALS = replace(
    BREAKOUT,
    subscription="signals",
    identity_envelope="cloudevents",
    identity_derived_fields=(),
    immutable_fields=("data.side", "data.price"),
    validity_source_time="time",
    scope_fields=("data.account",),
)
PATH = "/v1/hooks/signals"
STRUCTURED = "application/cloudevents+json"
BATCH = "application/cloudevents-batch+json"
EVENT: dict[str, object] = {
    "specversion": "1.0",
    "id": "alert-1",
    "source": "/alerts/btc%20breakout",
    "subject": "BTC € breakout",
    "type": "com.example.signal.fired",
    "time": "2026-11-30T12:00:30Z",
    "data": {"instrument": "BTCUSDT", "side": "buy", "price": "97000.5", "account": "acc-1"},
}
KEY = "signals/paper/%2Falerts%2Fbtc%2520breakout/e:alert-1"
BINARY_HEADERS = {
    "ce-specversion": "1.0",
    "ce-id": "alert-1",
    # Header values are percent-encoded once more (HTTP binding 3.1.3.2).
    "ce-source": "/alerts/btc%2520breakout",
    "ce-subject": "BTC%20%E2%82%AC%20breakout",
    "ce-type": "com.example.signal.fired",
    "ce-time": "2026-11-30T12:00:30Z",
}
DATA = orjson.dumps(EVENT["data"])


def event(**changes: object) -> dict[str, object]:
    out = dict(EVENT)
    for name, value in changes.items():
        if value is ...:
            out.pop(name, None)
        else:
            out[name] = value
    return out


def go(scenario: Any, **kwargs: Any) -> None:
    run(scenario, workflows=kwargs.pop("workflows", (BREAKOUT, SIGNALS)), **kwargs)


def test_the_three_modes_deliver_one_event_under_one_admission_key() -> None:
    async def scenario(h: Harness) -> None:
        structured = await post(h, orjson.dumps(EVENT), path=PATH, content_type=STRUCTURED)
        binary = await post(
            h, DATA, path=PATH, headers=BINARY_HEADERS, content_type="application/json"
        )
        batched = await post(h, orjson.dumps([EVENT]), path=PATH, content_type=BATCH)
        assert (structured[0], binary[0], batched[0]) == (202, 202, 207)
        assert structured[1]["admission_key"] == binary[1]["admission_key"] == KEY
        [element] = batched[1]["results"]
        assert element["status"] == 202 and element["admission_key"] == KEY
        assert [d.admission_key for d in h.sink.sent] == [KEY] * 3
        payloads = [orjson.loads(d.payload_json) for d in h.sink.sent]
        # Binary mode arrives in its structured form, Content-Type as datacontenttype.
        assert payloads[1] == {**EVENT, "datacontenttype": "application/json"}
        assert payloads[0] == payloads[2] == EVENT

    go(scenario)


@pytest.mark.parametrize(
    ("changes", "attribute"),
    [
        *[({name: ...}, name) for name in ("id", "source", "specversion", "type")],
        *[({name: ""}, name) for name in ("id", "source", "specversion", "type")],
        ({"specversion": "0.3"}, "specversion"),
        ({"time": "2026-11-30T12:00:30"}, "time"),
        ({"time": "30/11/2026"}, "time"),
        ({"data_base64": "aGk="}, "data_base64"),
        ({"Bad_Name": 1}, "Bad_Name"),
    ],
)
def test_spec_violations_are_422_naming_the_attribute_and_produce_nothing(
    changes: dict[str, object], attribute: str
) -> None:
    async def scenario(h: Harness) -> None:
        status, body, _ = await post(
            h, orjson.dumps(event(**changes)), path=PATH, content_type=STRUCTURED
        )
        assert status == 422
        problems = assert_error(body, "invalid_cloudevent")
        assert attribute in [p["field"] for p in problems], problems
        # Binary mode: the same violation in headers is named the same way.
        headers = {f"ce-{k}": str(v) for k, v in event(**changes).items() if k != "data"}
        if all(k.isalnum() and k.islower() for k in changes):
            status, body, _ = await post(h, DATA, path=PATH, headers=headers)
            assert status == 422
            named = [p["field"] for p in assert_error(body, "invalid_cloudevent")]
            assert attribute in named, body
        assert h.sink.sent == []

    go(scenario)


def test_a_batch_answers_each_event_in_order_and_produces_the_good_ones() -> None:
    async def scenario(h: Harness) -> None:
        batch = [
            EVENT,
            EVENT,  # a duplicate: delivered, admission answers it with the first run
            event(id=...),
            event(id="alert-2"),
            "not an event",
        ]
        status, body, _ = await post(h, orjson.dumps(batch), path=PATH, content_type=BATCH)
        assert status == 207
        results = body["results"]
        assert [r["status"] for r in results] == [202, 202, 422, 202, 422]
        assert results[0]["admission_key"] == results[1]["admission_key"] == KEY
        assert [p["field"] for p in results[2]["error"]["problems"]] == ["id"]
        assert results[4]["error"]["code"] == "invalid_cloudevent"
        assert [d.delivery_id for d in h.sink.sent] == [
            results[i]["delivery_id"] for i in (0, 1, 3)
        ]
        status, body, _ = await post(h, b"[]", path=PATH, content_type=BATCH)
        assert (status, body) == (207, {"results": []})

    go(scenario)


def test_a_batch_waits_per_event_and_answers_broker_failures_per_event() -> None:
    async def scenario(h: Harness) -> None:
        h.outcomes.answer = Outcome("admitted", "run-1")
        batch = orjson.dumps([EVENT, event(time="2030-01-01T00:00:00Z")])
        status, body, _ = await post(h, batch, path=PATH, content_type=BATCH, params={"wait": "1s"})
        assert status == 207
        first, future = body["results"]
        assert (first["status"], first["outcome"], first["run_id"]) == (200, "admitted", "run-1")
        assert (future["status"], future["error"]["code"]) == (422, "source_time_in_future")
        h.sink.fail = BrokerUnavailable("down")
        status, body, _ = await post(h, batch, path=PATH, content_type=BATCH)
        assert [r["status"] for r in body["results"]] == [503, 422]
        assert body["results"][0]["error"]["code"] == "kafka_unavailable"

    go(scenario)


def test_whole_batch_refusals() -> None:
    async def scenario(h: Harness) -> None:
        status, body, _ = await post(h, orjson.dumps(EVENT), path=PATH, content_type=BATCH)
        assert status == 422
        assert_error(body, "invalid_body")
        status, body, _ = await post(h, orjson.dumps([EVENT] * 101), path=PATH, content_type=BATCH)
        assert status == 413
        assert_error(body, "payload_too_large")
        status, body, _ = await post(h, b"[{", path=PATH, content_type=BATCH)
        assert status == 422
        assert_error(body, "invalid_body")
        assert h.sink.sent == []

    go(scenario)


@pytest.mark.parametrize(
    ("content_type", "headers"),
    [
        ("application/cloudevents+avro", {}),
        ("application/cloudevents", {}),
        ("application/cloudevents+json; charset=latin-1", {}),
        ("text/plain; charset=utf-16", BINARY_HEADERS),
    ],
)
def test_other_event_formats_and_charsets_are_415(
    content_type: str, headers: dict[str, str]
) -> None:
    async def scenario(h: Harness) -> None:
        status, body, _ = await post(
            h, orjson.dumps(EVENT), path=PATH, content_type=content_type, headers=headers
        )
        assert status == 415
        assert_error(body, "unsupported_media_type")

    go(scenario)


def test_the_envelope_must_match_the_destination() -> None:
    async def scenario(h: Harness) -> None:
        status, body, _ = await post(h, orjson.dumps(EVENT["data"]), path=PATH)
        assert status == 422
        assert_error(body, "cloudevent_required")
        status, body, _ = await post(h, orjson.dumps(EVENT), content_type=STRUCTURED)
        assert status == 422
        assert_error(body, "cloudevents_not_enabled")
        status, body, _ = await post(h, DATA, headers=BINARY_HEADERS)
        assert status == 422
        assert_error(body, "cloudevents_not_enabled")
        assert h.sink.sent == []

    go(scenario)


def test_the_same_authentication_hmac_over_the_raw_body_and_tokens() -> None:
    signed = replace(SIGNALS, subscription="signed", auth_hmac_secret_env="SECRET")
    tokened = replace(SIGNALS, subscription="tok", auth_token_env="TOKEN")
    secret = b"s3cret"

    async def scenario(h: Harness) -> None:
        now_s = NOW_MS // 1000
        for body, content_type, headers in (
            (orjson.dumps(EVENT), STRUCTURED, {}),
            (orjson.dumps([EVENT, event(id="alert-2")]), BATCH, {}),
            (DATA, "application/json", BINARY_HEADERS),
        ):
            signature = signed_for(secret, now_s, body, "signed")
            status, _, _ = await post(
                h, body, path="/v1/hooks/signed", content_type=content_type, headers=headers
            )
            assert status == 401
            status, _, _ = await post(
                h,
                body,
                path="/v1/hooks/signed",
                content_type=content_type,
                headers={**headers, **signature},
            )
            assert status in (202, 207)
            tampered = body.replace(b"buy", b"sell")
            status, _, _ = await post(
                h,
                tampered,
                path="/v1/hooks/signed",
                content_type=content_type,
                headers={**headers, **signed_for(secret, now_s + 1, body, "signed")},
            )
            assert status == 401
        # A token attribute of a structured event authenticates, and never reaches Kafka.
        sent = len(h.sink.sent)
        status, _, _ = await post(
            h, orjson.dumps(event(token="t0k")), path="/v1/hooks/tok", content_type=STRUCTURED
        )
        assert status == 202
        assert "token" not in orjson.loads(h.sink.sent[sent].payload_json)
        status, _, _ = await post(
            h, DATA, path="/v1/hooks/tok", headers=BINARY_HEADERS, params={"token": "t0k"}
        )
        assert status == 202
        status, _, _ = await post(h, DATA, path="/v1/hooks/tok", headers=BINARY_HEADERS)
        assert status == 401

    go(
        scenario,
        workflows=(signed, tokened),
        environ={"SECRET": secret.decode(), "TOKEN": "t0k"},
    )


def test_hostile_input_gets_4xx() -> None:
    nested = b"[" * 2000 + b"1" + b"]" * 2000
    deep_event = orjson.dumps(EVENT)[:-1] + b',"data":' + nested + b"}"

    async def scenario(h: Harness) -> None:
        started = time.monotonic()
        for body, content_type, headers in (
            (deep_event.replace(b'"data":{', b'"d":{'), STRUCTURED, {}),
            (b'{"specversion":"1.0","a":' * 1200 + b"1" + b"}" * 1200, STRUCTURED, {}),
            (b"[" + b",".join([deep_event] * 3) + b"]", BATCH, {}),
            (nested, "application/json", BINARY_HEADERS),
            (orjson.dumps([{"x" * 100: i} for i in range(100)]), BATCH, {}),
            (b"[" * 5000, BATCH, {}),
            (b"\xff\xfe", "application/json", BINARY_HEADERS),
            (b"{}", "application/json", {**BINARY_HEADERS, "ce-x": "%FF"}),
            (b"{}", "application/json", {**BINARY_HEADERS, "ce-": "x"}),
        ):
            status, answer, _ = await post(
                h, body, path=PATH, content_type=content_type, headers=headers
            )
            if status == 207:
                results = answer["results"]
                assert results and all(400 <= r["status"] < 500 for r in results), answer
            else:
                assert 400 <= status < 500, (status, answer)
        assert h.sink.sent == []
        assert time.monotonic() - started < 30

    go(scenario)


def test_every_front_door_refusal_has_its_answer_and_is_in_the_readme() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    for reason in FRONT_DOOR_REFUSALS:
        answer = refused(Refusal(reason, (), "detail"))
        assert (answer.status, answer.code) == (422, reason)
        assert f"`{reason}`" in readme
