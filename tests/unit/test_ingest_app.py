"""The ingest app's HTTP behaviour, with in-memory stand-ins for its three components.

Everything Kafka-facing is covered by ``tests/integration/test_ingest_*.py`` on the real
broker; here the directory, sink and outcome source are small in-memory classes so that
every status code and error body can be pinned down quickly.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import resource
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from consumers.ingest.app import create_app
from consumers.ingest.auth import sign
from consumers.ingest.errors import BrokerUnavailable, IngestSettingsError
from consumers.ingest.listener import connection_budget
from consumers.ingest.outcomes import Outcome
from consumers.ingest.settings import IngestSettings
from schemas.commands import AdmitDelivery
from schemas.events import WorkflowRevised
from streams.settings import Settings
from streams.text import parse_duration_s
from tests.unit.test_ingest_auth import workflow

NOW_MS = 1_796_040_060_000
"""2026-11-30T12:01:00Z: when the example candle (12:00, 1m) closes, so it is not in the future."""

BREAKOUT = workflow(
    subscription="btc-breakout",
    identity_derived_fields=("venue", "instrument", "interval", "candle_open", "rule"),
    immutable_fields=("side", "rule", "price"),
    validity_source_time="candle_close",
)
PAYLOAD: dict[str, object] = {
    "source": "tradingview",
    "venue": "binance",
    "instrument": "BTCUSDT",
    "interval": "1m",
    "candle_open": "2026-11-30T12:00:00Z",
    "rule": "breakout-v1",
    "side": "buy",
    "price": "97000.5",
    "account": "acc-1",
}
BODY = orjson.dumps(PAYLOAD)


@dataclass
class MemoryDirectory:
    workflows: dict[tuple[str, str], WorkflowRevised] = field(default_factory=dict)
    loaded: bool = True
    fail: Exception | None = None

    async def find(
        self, subscription: str, environment: str, timeout_s: float
    ) -> WorkflowRevised | None:
        if self.fail is not None:
            raise self.fail
        return self.workflows.get((subscription, environment))


@dataclass
class MemorySink:
    sent: list[AdmitDelivery] = field(default_factory=list)
    fail: Exception | None = None
    timeouts: list[float] = field(default_factory=list)

    async def send(self, delivery: AdmitDelivery, timeout_s: float) -> None:
        self.timeouts.append(timeout_s)
        if self.fail is not None:
            raise self.fail
        self.sent.append(delivery)

    def reachable(self, timeout_s: float) -> bool:
        return self.fail is None


@dataclass
class MemoryOutcomes:
    decided: dict[str, Outcome] = field(default_factory=dict)
    waiting: dict[str, asyncio.Future[Outcome]] = field(default_factory=dict)
    answer: Outcome | None = None

    def expect(self, delivery_id: str) -> asyncio.Future[Outcome]:
        future: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        if self.answer is not None:
            future.set_result(self.answer)
        self.waiting[delivery_id] = future
        return future

    def forget(self, delivery_id: str) -> None:
        self.waiting.pop(delivery_id, None)

    async def wait(self, future: asyncio.Future[Outcome], timeout_s: float) -> Outcome | None:
        try:
            return await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            return None


@dataclass
class Harness:
    client: TestClient[web.Request, web.Application]
    directory: MemoryDirectory
    sink: MemorySink
    outcomes: MemoryOutcomes
    environ: dict[str, str]
    clock: list[int]


Scenario = Callable[[Harness], Awaitable[None]]


def signed_for(secret: bytes, t: int, body: bytes = BODY, sub: str = "signed") -> dict[str, str]:
    """The signature header of a sender posting ``body`` to ``sub`` in paper."""
    return {"X-Sluicegate-Signature": sign(secret, t, sub, "paper", body)}


def details(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The ``detail`` of every access-log line: what a refusal tells the operator."""
    return [
        str(r.fields.get("detail"))  # type: ignore[attr-defined]
        for r in caplog.records
        if r.name == "sluicegate.ingest.access"
    ]


def run(
    scenario: Scenario,
    *,
    workflows: tuple[WorkflowRevised, ...] = (BREAKOUT,),
    environ: Mapping[str, str] | None = None,
    limits: IngestSettings | None = None,
    after_ack: Callable[[AdmitDelivery], None] | None = None,
) -> None:
    async def main() -> None:
        directory = MemoryDirectory({(w.subscription, w.environment): w for w in workflows})
        sink, outcomes, env = MemorySink(), MemoryOutcomes(), dict(environ or {})
        clock = [NOW_MS]
        app = create_app(
            Settings(),
            limits=limits,
            clock=lambda: clock[0],
            environ=env,
            directory=directory,
            sink=sink,
            outcomes=outcomes,
            after_ack=after_ack,
        )
        async with TestClient(TestServer(app)) as client:
            await scenario(Harness(client, directory, sink, outcomes, env, clock))

    asyncio.run(main())


async def post(
    h: Harness,
    body: bytes = BODY,
    *,
    path: str = "/v1/hooks/btc-breakout",
    params: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
    content_type: str = "application/json",
) -> tuple[int, dict[str, Any], Mapping[str, str]]:
    all_headers = {"Content-Type": content_type, **(headers or {})}
    async with h.client.post(path, data=body, params=params, headers=all_headers) as response:
        payload = orjson.loads(await response.read())
        return response.status, payload, response.headers


def assert_error(payload: dict[str, Any], code: str) -> list[dict[str, str]]:
    assert set(payload) == {"error"}
    assert set(payload["error"]) == {"code", "message", "problems"}
    assert payload["error"]["code"] == code
    assert isinstance(payload["error"]["message"], str)
    problems: list[dict[str, str]] = payload["error"]["problems"]
    assert all(set(p) == {"field", "message"} for p in problems)
    return problems


def test_an_accepted_delivery_is_answered_with_its_id_and_admission_key() -> None:
    async def scenario(h: Harness) -> None:
        status, body, _ = await post(h)
        assert status == 202
        (delivery,) = h.sink.sent
        assert body == {
            "delivery_id": delivery.delivery_id,
            "admission_key": delivery.admission_key,
        }
        assert delivery.admission_key == (
            "btc-breakout/paper/tradingview/d:binance|BTCUSDT|1m|1796040000000|breakout-v1"
        )
        assert delivery.received_at_ms == NOW_MS
        assert delivery.channel == "http"
        assert delivery.environment == "paper"
        assert orjson.loads(delivery.payload_json) == PAYLOAD

    run(scenario)


def test_live_is_a_separate_destination() -> None:
    async def scenario(h: Harness) -> None:
        status, body, _ = await post(h, params={"env": "live"})
        assert status == 401
        assert_error(body, "unauthorized")
        live = replace(BREAKOUT, environment="live")
        h.directory.workflows[("btc-breakout", "live")] = live
        status, body, _ = await post(h, params={"env": "live"})
        assert status == 202
        assert body["admission_key"].startswith("btc-breakout/live/")

    run(scenario)


def test_retries_of_one_occurrence_share_the_admission_key() -> None:
    async def scenario(h: Harness) -> None:
        keys = set()
        for i in range(4):
            h.clock[0] = NOW_MS + i * 5000
            status, body, _ = await post(h)
            assert status == 202
            keys.add(body["admission_key"])
        assert len(keys) == 1
        assert len({d.delivery_id for d in h.sink.sent}) == 4
        assert [d.received_at_ms for d in h.sink.sent] == [NOW_MS + i * 5000 for i in range(4)]

    run(scenario)


def test_tradingview_text_alert_with_token_in_url() -> None:
    wf = replace(BREAKOUT, subscription="tv", auth_token_env="TV_TOKEN")
    text = (
        b"source=tradingview venue=binance instrument=BTCUSDT interval=1 "
        b"candle_open=2026-11-30T12:00:00Z rule=breakout-v1 side=buy price=97000.5"
    )

    async def scenario(h: Harness) -> None:
        status, body, _ = await post(
            h, text, path="/v1/hooks/tv", params={"token": "tv-s3cret"}, content_type="text/plain"
        )
        assert status == 202, body
        (delivery,) = h.sink.sent
        assert orjson.loads(delivery.payload_json)["interval"] == "1"

    run(scenario, workflows=(wf,), environ={"TV_TOKEN": "tv-s3cret"})


def test_a_token_in_the_body_is_removed_before_producing() -> None:
    wf = replace(BREAKOUT, subscription="tv", auth_token_env="TV_TOKEN")

    async def scenario(h: Harness) -> None:
        body = orjson.dumps({**PAYLOAD, "token": "tv-s3cret"})
        status, answer, _ = await post(h, body, path="/v1/hooks/tv")
        assert status == 202, answer
        (delivery,) = h.sink.sent
        assert "token" not in orjson.loads(delivery.payload_json)
        assert "tv-s3cret" not in repr(delivery)
        # An open subscription drops a stray token too: it is never data.
        status, _, _ = await post(h, body)
        assert status == 202
        assert "tv-s3cret" not in h.sink.sent[1].payload_json

    run(scenario, workflows=(wf, BREAKOUT), environ={"TV_TOKEN": "tv-s3cret"})


@pytest.mark.parametrize(
    ("params", "extra"),
    [
        ({}, {}),
        ({"token": "wrong"}, {}),
        ({}, {"token": "wrong"}),
        ({}, {"token": 42}),
    ],
)
def test_bad_or_missing_token_is_401_and_nothing_is_produced(
    params: dict[str, str], extra: dict[str, object]
) -> None:
    wf = replace(BREAKOUT, subscription="tv", auth_token_env="TV_TOKEN")

    async def scenario(h: Harness) -> None:
        status, body, _ = await post(
            h, orjson.dumps({**PAYLOAD, **extra}), path="/v1/hooks/tv", params=params
        )
        assert status == 401
        assert_error(body, "unauthorized")
        assert h.sink.sent == []

    run(scenario, workflows=(wf,), environ={"TV_TOKEN": "tv-s3cret"})


def test_unset_secret_variable_refuses_everything_and_the_log_names_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    wf = replace(BREAKOUT, subscription="tv", auth_token_env="TV_TOKEN")

    async def scenario(h: Harness) -> None:
        for params in ({}, {"token": ""}, {"token": "anything"}):
            status, body, _ = await post(h, path="/v1/hooks/tv", params=params)
            assert status == 401
            assert "TV_TOKEN" not in body["error"]["message"]
        assert h.sink.sent == []

    with caplog.at_level(logging.INFO):
        run(scenario, workflows=(wf,), environ={})
    assert all("set the environment variable TV_TOKEN" in d for d in details(caplog))


def test_signed_requests_tampered_expired_and_replayed(caplog: pytest.LogCaptureFixture) -> None:
    secret = b"hook-secret"
    wf = replace(BREAKOUT, subscription="signed", auth_hmac_secret_env="HOOK_SECRET")

    async def scenario(h: Harness) -> None:
        path = "/v1/hooks/signed"
        now_s = NOW_MS // 1000
        good = signed_for(secret, now_s)
        status, body, _ = await post(h, path=path, headers=good)
        assert status == 202, body
        # Replayed: same header and body again.
        status, body, _ = await post(h, path=path, headers=good)
        assert status == 401
        # Tampered body.
        status, _, _ = await post(
            h, BODY.replace(b"buy", b"sell"), path=path, headers=signed_for(secret, now_s + 1)
        )
        assert status == 401
        # Expired: signed 301 s before the (injected) clock.
        status, body, _ = await post(h, path=path, headers=signed_for(secret, now_s - 301))
        assert status == 401
        # Missing.
        status, body, _ = await post(h, path=path)
        assert status == 401
        assert len(h.sink.sent) == 1

    with caplog.at_level(logging.INFO):
        run(scenario, workflows=(wf,), environ={"HOOK_SECRET": secret.decode()})
    # The reasons are the operator's to read, in the access log.
    refusals = details(caplog)[1:]
    assert "already used" in refusals[0]
    assert "does not match" in refusals[1]
    assert "window" in refusals[2]
    assert "X-Sluicegate-Signature" in refusals[3]


def test_a_signed_request_refused_by_kafka_may_be_repeated() -> None:
    secret = b"hook-secret"
    wf = replace(BREAKOUT, subscription="signed", auth_hmac_secret_env="HOOK_SECRET")

    async def scenario(h: Harness) -> None:
        header = signed_for(secret, NOW_MS // 1000)
        h.sink.fail = BrokerUnavailable("down", headers={"Retry-After": "2"})
        status, body, headers = await post(h, path="/v1/hooks/signed", headers=header)
        assert status == 503
        assert_error(body, "kafka_unavailable")
        assert headers["Retry-After"] == "2"
        h.sink.fail = None
        status, _, _ = await post(h, path="/v1/hooks/signed", headers=header)
        assert status == 202

    run(scenario, workflows=(wf,), environ={"HOOK_SECRET": secret.decode()})


def test_authentication_comes_before_body_problems() -> None:
    wf = replace(BREAKOUT, subscription="tv", auth_token_env="TV_TOKEN")

    async def scenario(h: Harness) -> None:
        status, body, _ = await post(h, b"{broken", path="/v1/hooks/tv")
        assert status == 401
        status, body, _ = await post(h, b"{broken", path="/v1/hooks/tv", params={"token": "t"})
        assert status == 422
        assert_error(body, "invalid_body")

    run(scenario, workflows=(wf,), environ={"TV_TOKEN": "t"})


@pytest.mark.parametrize(
    ("body", "code", "fields"),
    [
        (b"{not json", "invalid_body", ["body"]),
        (b"[1, 2]", "invalid_body", ["body"]),
        (b'"a string"', "invalid_body", ["body"]),
        (
            b"{}",
            "invalid_identity",
            ["source", "venue", "instrument", "interval", "candle_open", "rule"],
        ),
        (
            orjson.dumps({**PAYLOAD, "candle_open": "yesterday", "interval": "1x"}),
            "invalid_identity",
            ["candle_open", "interval"],
        ),
        (
            orjson.dumps({k: v for k, v in PAYLOAD.items() if k not in ("venue", "rule")}),
            "invalid_identity",
            ["venue", "rule"],
        ),
        (
            orjson.dumps({**PAYLOAD, "instrument": {"nested": 1}}),
            "invalid_identity",
            ["instrument"],
        ),
    ],
)
def test_unreadable_bodies_are_422_with_every_problem(
    body: bytes, code: str, fields: list[str]
) -> None:
    async def scenario(h: Harness) -> None:
        status, answer, _ = await post(h, body)
        assert status == 422
        problems = assert_error(answer, code)
        assert sorted(p["field"] for p in problems) == sorted(fields)
        assert h.sink.sent == []

    run(scenario)


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"env": "prod"}, "env"),
        ({"env": ""}, "env"),
        ({"wait": "forever"}, "wait"),
        ({"wait": "11s"}, "wait"),
        ({"wait": "-1s"}, "wait"),
    ],
)
def test_bad_query_parameters_are_422(params: dict[str, str], field: str) -> None:
    async def scenario(h: Harness) -> None:
        status, body, _ = await post(h, params=params)
        assert status == 422
        problems = assert_error(
            body, "invalid_environment" if field == "env" else "invalid_request"
        )
        assert [p["field"] for p in problems] == [field]

    run(scenario)


def test_env_given_twice_is_422() -> None:
    async def scenario(h: Harness) -> None:
        status, body, _ = await post(h, path="/v1/hooks/btc-breakout?env=paper&env=live")
        assert status == 422
        assert_error(body, "invalid_environment")

    run(scenario)


def test_unknown_subscription_route_and_method() -> None:
    async def scenario(h: Harness) -> None:
        # No such destination: the same answer as bad credentials, naming nothing.
        status, body, _ = await post(h, path="/v1/hooks/nobody")
        assert status == 401
        assert_error(body, "unauthorized")
        assert "nobody" not in body["error"]["message"]
        status, body, _ = await post(h, path="/v1/elsewhere")
        assert status == 404
        assert_error(body, "not_found")
        async with h.client.get("/v1/hooks/btc-breakout") as response:
            assert response.status == 405
            assert_error(orjson.loads(await response.read()), "method_not_allowed")
            assert response.headers["Allow"] == "POST"

    run(scenario)


def test_wrong_content_type_is_415() -> None:
    async def scenario(h: Harness) -> None:
        for content_type in ("application/x-www-form-urlencoded", "text/html", "image/png"):
            status, body, _ = await post(h, content_type=content_type)
            assert status == 415
            assert_error(body, "unsupported_media_type")
        status, _, _ = await post(h, content_type="application/json; charset=latin-1")
        assert status == 415

    run(scenario)


def test_bodies_over_the_limit_are_413_with_or_without_content_length() -> None:
    limits = IngestSettings(max_body_bytes=2048)

    async def scenario(h: Harness) -> None:
        big = orjson.dumps({**PAYLOAD, "pad": "x" * 4096})
        status, body, _ = await post(h, big)
        assert status == 413
        assert_error(body, "payload_too_large")

        async def chunks() -> Any:
            for _ in range(10):
                yield b" " * 512

        async with h.client.post(
            "/v1/hooks/btc-breakout", data=chunks(), headers={"Content-Type": "application/json"}
        ) as response:
            assert response.status == 413
        # Exactly at the limit is fine (JSON allows trailing whitespace).
        status, _, _ = await post(h, BODY + b" " * (2048 - len(BODY)))
        assert status == 202
        assert len(h.sink.sent) == 1

    run(scenario, limits=limits)


def test_kafka_not_acknowledging_is_503_with_retry_after() -> None:
    async def scenario(h: Harness) -> None:
        h.sink.fail = BrokerUnavailable("no ack", headers={"Retry-After": "2"})
        status, body, headers = await post(h)
        assert status == 503
        assert_error(body, "kafka_unavailable")
        assert headers["Retry-After"] == "2"
        # The sink is given what is left of the 2 s budget, never more.
        assert 0 < h.sink.timeouts[0] <= 2.0

    run(scenario)


def test_workflow_table_unreadable_is_503() -> None:
    async def scenario(h: Harness) -> None:
        h.directory.fail = BrokerUnavailable("table", headers={"Retry-After": "2"})
        status, body, _ = await post(h)
        assert status == 503
        assert_error(body, "kafka_unavailable")

    run(scenario)


def test_a_fault_after_the_ack_is_a_logged_500(caplog: pytest.LogCaptureFixture) -> None:
    def fault(_delivery: AdmitDelivery) -> None:
        raise RuntimeError("injected fault")

    async def scenario(h: Harness) -> None:
        status, body, _ = await post(h)
        assert status == 500
        assert_error(body, "internal_error")
        assert "injected" not in body["error"]["message"]
        assert len(h.sink.sent) == 1

    with caplog.at_level(logging.INFO):
        run(scenario, after_ack=fault)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors and errors[0].exc_info is not None


def test_wait_returns_the_outcome_or_pending() -> None:
    async def scenario(h: Harness) -> None:
        h.outcomes.answer = Outcome("deduplicated", "run-abc", "in_flight")
        status, body, _ = await post(h, params={"wait": "2s"})
        assert status == 200
        assert body["outcome"] == "deduplicated"
        assert body["run_id"] == "run-abc"
        assert body["duplicate"] is True
        assert body["delivery_id"] == h.sink.sent[0].delivery_id
        h.outcomes.answer = None
        status, body, _ = await post(h, params={"wait": "100ms"})
        assert status == 202
        assert body["outcome"] == "pending"
        assert h.outcomes.waiting == {}

    run(scenario)


def test_no_waiter_is_left_behind_when_nothing_was_produced() -> None:
    async def scenario(h: Harness) -> None:
        h.sink.fail = BrokerUnavailable("no ack")
        status, _, _ = await post(h, params={"wait": "1s"})
        assert status == 503
        assert h.outcomes.waiting == {}

    run(scenario)


def test_health_and_readiness() -> None:
    async def scenario(h: Harness) -> None:
        async with h.client.get("/healthz") as response:
            assert response.status == 200
        async with h.client.get("/readyz") as response:
            assert response.status == 200
            assert (await response.json())["checks"] == {"kafka": True, "workflows": True}
        h.directory.loaded = False
        async with h.client.get("/readyz") as response:
            assert response.status == 503
        h.directory.loaded = True
        h.sink.fail = BrokerUnavailable("down")
        async with h.client.get("/readyz") as response:
            assert response.status == 503
            assert (await response.json())["checks"]["kafka"] is False

    run(scenario)


def test_access_log_has_one_line_per_request_without_secrets(
    caplog: pytest.LogCaptureFixture,
) -> None:
    wf = replace(BREAKOUT, subscription="tv", auth_token_env="TV_TOKEN")
    token = "tv-5ecr3t-t0ken"

    async def scenario(h: Harness) -> None:
        await post(h, path="/v1/hooks/tv", params={"token": token})
        await post(h, path="/v1/hooks/tv", params={"token": token + "x"})
        await post(h, orjson.dumps({**PAYLOAD, "token": token}), path="/v1/hooks/tv")
        await post(h, b"{broken " + token.encode(), path="/v1/hooks/tv", params={"token": token})

    with caplog.at_level(logging.DEBUG):
        run(scenario, workflows=(wf,), environ={"TV_TOKEN": token})
    lines = [r for r in caplog.records if r.name == "sluicegate.ingest.access"]
    assert len(lines) == 4
    fields = [r.fields for r in lines]  # type: ignore[attr-defined]
    assert [f["status"] for f in fields] == [202, 401, 202, 422]
    for f in fields:
        assert f["method"] == "POST"
        assert f["path"] == "/v1/hooks/tv"
        assert f["subscription"] == "tv"
        assert isinstance(f["latency_ms"], float)
    assert fields[0]["delivery_id"] is not None
    assert fields[1]["delivery_id"] is None
    for record in caplog.records:
        assert token not in record.getMessage()
        assert token not in repr(getattr(record, "fields", ""))


def test_ingest_settings_from_the_environment() -> None:
    assert IngestSettings.from_env({}) == IngestSettings()
    custom = IngestSettings.from_env(
        {
            "SLUICEGATE_INGEST_MAX_BODY_BYTES": "4096",
            "SLUICEGATE_INGEST_REPLAY_WINDOW": "2m",
            "SLUICEGATE_INGEST_ACK_TIMEOUT": "1500ms",
        }
    )
    assert (custom.max_body_bytes, custom.replay_window_s, custom.ack_timeout_s) == (
        4096,
        120.0,
        1.5,
    )
    for var, value in (
        ("SLUICEGATE_INGEST_MAX_BODY_BYTES", "lots"),
        ("SLUICEGATE_INGEST_MAX_BODY_BYTES", "\u00b2"),
        ("SLUICEGATE_INGEST_MAX_BODY_BYTES", "1" * 5000),
        ("SLUICEGATE_READ_HTTP", "127.0.0.1:" + "8" * 5000),
        ("SLUICEGATE_INGEST_REPLAY_WINDOW", "0s"),
        ("SLUICEGATE_INGEST_ACK_TIMEOUT", "5 parsecs"),
    ):
        with pytest.raises(IngestSettingsError, match=var):
            IngestSettings.from_env({var: value})


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("2s", 2.0),
        ("500ms", 0.5),
        ("1.5s", 1.5),
        ("2", 2.0),
        ("1m", 60.0),
        ("x", None),
        # Digits to float() but not ASCII; a trailing newline is not "end of text" either.
        ("\u0661s", None),
        ("\uff12s", None),
        ("2s\n", 2.0),
        ("2s\u2003", None),
    ],
)
def test_durations(text: str, seconds: float | None) -> None:
    assert parse_duration_s(text) == seconds


def _canonical_paths(app: web.Application) -> set[str]:
    return {resource.canonical for resource in app.router.resources()}


def test_the_webhook_app_serves_the_hooks_and_health_only() -> None:
    app = create_app(
        Settings(), directory=MemoryDirectory(), sink=MemorySink(), outcomes=MemoryOutcomes()
    )
    assert _canonical_paths(app) == {"/v1/hooks/{subscription}", "/healthz", "/readyz"}
    if importlib.util.find_spec("projections.http") is not None:
        from projections.http import create_read_app

        read = _canonical_paths(create_read_app(Settings()))
        assert {"/v1/stats", "/metrics", "/v1/runs/{run_id}"} <= read
        assert not any(path.startswith("/v1/hooks") for path in read)


def test_broken_http_framing_is_a_4xx() -> None:
    async def scenario(h: Harness) -> None:
        host, port = h.client.host, h.client.port
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(
            b"POST /v1/hooks/btc-breakout HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"zz\r\nnot a chunk\r\n0\r\n\r\n"
        )
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), 10)
        writer.close()
        status = int(status_line.split()[1])
        assert 400 <= status < 500, status_line
        assert h.sink.sent == []

    run(scenario)


def test_unauthenticated_callers_get_one_answer_whatever_the_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Unknown destination, unset secret, no/wrong/malformed/expired/replayed credentials:
    the same 401, byte for byte; only ingest's log says which it was."""
    secret = b"hook-secret"
    tv = replace(BREAKOUT, subscription="tv", auth_token_env="TV_TOKEN")
    signed = replace(BREAKOUT, subscription="signed", auth_hmac_secret_env="HOOK_SECRET")
    unset = replace(BREAKOUT, subscription="closed", auth_token_env="CLOSED_TOKEN")
    answers: dict[str, tuple[int, bytes, str | None]] = {}

    async def scenario(h: Harness) -> None:
        async def send(name: str, path: str, **kwargs: Any) -> None:
            headers = {"Content-Type": "application/json", **kwargs.pop("headers", {})}
            async with h.client.post(path, data=BODY, headers=headers, **kwargs) as response:
                answers[name] = (
                    response.status,
                    await response.read(),
                    response.headers.get("WWW-Authenticate"),
                )

        now_s = NOW_MS // 1000
        good = signed_for(secret, now_s)
        status, _, _ = await post(h, path="/v1/hooks/signed", headers=good)
        assert status == 202
        await send("unknown subscription", "/v1/hooks/nobody")
        await send("unknown environment", "/v1/hooks/tv", params={"env": "live"})
        await send("unset secret", "/v1/hooks/closed", params={"token": "anything"})
        await send("no token", "/v1/hooks/tv")
        await send("wrong token", "/v1/hooks/tv", params={"token": "nope"})
        await send("two tokens", "/v1/hooks/tv", params=[("token", "a"), ("token", "b")])
        await send("no signature", "/v1/hooks/signed")
        await send("malformed", "/v1/hooks/signed", headers={"X-Sluicegate-Signature": "t=1"})
        await send(
            "wrong key",
            "/v1/hooks/signed",
            headers=signed_for(b"x", now_s),
        )
        await send(
            "expired",
            "/v1/hooks/signed",
            headers=signed_for(secret, now_s - 301),
        )
        await send("replayed", "/v1/hooks/signed", headers=good)
        assert len(h.sink.sent) == 1

    with caplog.at_level(logging.INFO):
        run(
            scenario,
            workflows=(tv, signed, unset),
            environ={"TV_TOKEN": "tv-s3cret", "HOOK_SECRET": secret.decode()},
        )
    distinct = set(answers.values())
    assert len(distinct) == 1, answers
    ((status, body, _),) = distinct
    assert status == 401
    assert_error(orjson.loads(body), "unauthorized")
    # The operator learns the reason from the access log, never the secret.
    reasons = details(caplog)
    assert any("CLOSED_TOKEN" in d for d in reasons)
    assert any("nobody" in d for d in reasons)
    assert any("already used" in d for d in reasons)
    for record in caplog.records:
        text = record.getMessage() + repr(getattr(record, "fields", ""))
        assert "tv-s3cret" not in text and secret.decode() not in text


@pytest.mark.parametrize(
    ("shape", "kwargs"),
    [
        ("media type", {"content_type": "text/html"}),
        ("compressed", {"headers": {"Content-Encoding": "gzip"}}),
        ("environment", {"params": {"env": "prod"}}),
        ("wait", {"params": {"wait": "forever"}}),
        ("too large", {"body": b" " * 70_000}),
    ],
)
def test_answers_before_authentication_do_not_depend_on_the_configuration(
    shape: str, kwargs: dict[str, Any]
) -> None:
    """A request's shape is judged the same way for every name: no oracle for what exists."""
    tv = replace(BREAKOUT, subscription="tv", auth_token_env="TV_TOKEN")

    async def scenario(h: Harness) -> None:
        known = await post(h, path="/v1/hooks/tv", **kwargs)
        unknown = await post(h, path="/v1/hooks/nobody", **kwargs)
        assert (known[0], known[1]) == (unknown[0], unknown[1]), shape
        assert 400 <= known[0] < 500

    run(scenario, workflows=(tv,), environ={"TV_TOKEN": "t"})


def test_the_connection_settings() -> None:
    default = IngestSettings.from_env({})
    assert (default.idle_timeout_s, default.max_connections) == (15.0, 4096)
    custom = IngestSettings.from_env(
        {"SLUICEGATE_INGEST_IDLE_TIMEOUT": "500ms", "SLUICEGATE_INGEST_MAX_CONNECTIONS": "20"}
    )
    assert (custom.idle_timeout_s, custom.max_connections) == (0.5, 20)
    for var, value in (
        ("SLUICEGATE_INGEST_IDLE_TIMEOUT", "0s"),
        ("SLUICEGATE_INGEST_IDLE_TIMEOUT", "2h"),
        ("SLUICEGATE_INGEST_MAX_CONNECTIONS", "0"),
        ("SLUICEGATE_INGEST_MAX_CONNECTIONS", "-5"),
        ("SLUICEGATE_INGEST_MAX_CONNECTIONS", "\u00b2"),
        ("SLUICEGATE_INGEST_MAX_CONNECTIONS", "1000001"),
    ):
        with pytest.raises(IngestSettingsError, match=var):
            IngestSettings.from_env({var: value})


INFINITY = resource.RLIM_INFINITY


@pytest.mark.parametrize(
    ("wanted", "listeners", "soft", "hard", "budget"),
    [
        (4096, 2, 20_000, 20_000, (4096, 20_000)),  # fits: nothing changes
        (4096, 2, 1024, 524_288, (4096, 8448)),  # the soft limit raised to fit
        (4096, 1, 1024, 2048, (1792, 2048)),  # raised to the hard limit, fewer connections
        (4096, 2, 1024, INFINITY, (4096, 8448)),
        (10, 1, INFINITY, INFINITY, (10, INFINITY)),
        (4096, 2, 100, 200, (1, 200)),  # never less than one
    ],
)
def test_the_connections_a_listener_holds_fit_the_descriptor_limit(
    wanted: int, listeners: int, soft: int, hard: int, budget: tuple[int, int]
) -> None:
    assert connection_budget(wanted, listeners, soft, hard) == budget


def test_the_read_listener_settings() -> None:
    assert IngestSettings.from_env({}).read_http == ("127.0.0.1", 8081)
    assert IngestSettings.from_env({"SLUICEGATE_READ_HTTP": "off"}).read_http is None
    custom = IngestSettings.from_env(
        {"SLUICEGATE_READ_HTTP": "0.0.0.0:9100", "SLUICEGATE_READ_TOKEN": "t" * 32}
    )
    assert (custom.read_http, custom.read_token) == (("0.0.0.0", 9100), "t" * 32)
    for var, value in (
        ("SLUICEGATE_READ_HTTP", "8081"),
        ("SLUICEGATE_READ_HTTP", "localhost:\u0668\u0660"),
        ("SLUICEGATE_READ_TOKEN", "short"),
        ("SLUICEGATE_READ_TOKEN", "has spaces in it but is long enough"),
    ):
        with pytest.raises(IngestSettingsError, match=var) as refused:
            IngestSettings.from_env({var: value})
        if var == "SLUICEGATE_READ_TOKEN":
            assert value not in str(refused.value)


def test_a_client_that_goes_away_mid_body_gets_no_answer_and_no_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario(h: Harness) -> None:
        for ending in ("close", "half-close"):
            reader, writer = await asyncio.open_connection(h.client.host, h.client.port)
            writer.write(
                b"POST /v1/hooks/btc-breakout HTTP/1.1\r\nHost: x\r\n"
                b"Content-Type: application/json\r\nContent-Length: 500\r\n\r\n" + BODY[:20]
            )
            await writer.drain()
            if ending == "half-close":
                writer.write_eof()
                assert await asyncio.wait_for(reader.read(), 10) == b""
            writer.close()
        for _ in range(100):  # the server notices after the client has gone
            if len(details(caplog)) == 2:
                break
            await asyncio.sleep(0.02)
        assert h.sink.sent == []

    with caplog.at_level(logging.INFO):
        run(scenario)
    lines = [r for r in caplog.records if r.name == "sluicegate.ingest.access"]
    assert [r.fields["status"] for r in lines] == [499, 499]  # type: ignore[attr-defined]
    assert [r.fields["error"] for r in lines] == ["client_disconnected"] * 2  # type: ignore[attr-defined]
    assert not any(r.exc_info or r.levelno >= logging.ERROR for r in caplog.records)


def test_a_body_sent_too_slowly_is_408_and_one_sent_in_pieces_is_read_whole() -> None:
    limits = IngestSettings(body_timeout_s=0.3)

    async def scenario(h: Harness) -> None:
        reader, writer = await asyncio.open_connection(h.client.host, h.client.port)
        writer.write(
            b"POST /v1/hooks/btc-breakout HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY[:20]
        )
        await writer.drain()  # ... and the rest never comes
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        assert head.startswith(b"HTTP/1.1 408 ")
        writer.close()

        # A body that arrives in pieces after the headers is waited for, not cut short.
        reader, writer = await asyncio.open_connection(h.client.host, h.client.port)
        writer.write(
            b"POST /v1/hooks/btc-breakout HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(BODY)
        )
        for start in range(0, len(BODY), 16):
            await writer.drain()
            await asyncio.sleep(0.01)
            writer.write(BODY[start : start + 16])
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        assert head.startswith(b"HTTP/1.1 202 ")
        writer.close()
        assert len(h.sink.sent) == 1

    run(scenario, limits=limits)
