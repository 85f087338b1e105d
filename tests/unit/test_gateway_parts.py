"""The gateway's pure parts: settings, the dispatch mapping, orders, answers, restore rules."""

from __future__ import annotations

import dataclasses
import logging
from decimal import Decimal

import orjson
import pytest

from consumers.gateway.app import GatewayApp
from consumers.gateway.dispatch import NO_DEADLINE_MS, accept_dispatch, generation_number
from consumers.gateway.orders import (
    Unsendable,
    lookup_answered,
    order_request,
    venue_answered,
)
from consumers.gateway.settings import GatewaySettings, GatewaySettingsError
from consumers.gateway.shell import Shell, send_window_ms
from consumers.venue.adapter import (
    Accepted,
    Fill,
    NotFound,
    OrderStatus,
    OrderType,
    Rejected,
    RejectReason,
    Side,
    TimeInForce,
    Unknown,
    UnknownReason,
)
from schemas.commands import RecoverRun
from sluicegate.supervisor import components_for
from streams.core.journal import JournalPolicy, LookupRequest, SendRequest
from streams.engine.failpoints import Failpoints
from streams.settings import load_settings
from tests.support.gateway import dispatch
from tests.support.journal import World
from tests.support.journal import dispatch as journal_dispatch

POLICY = JournalPolicy()


def send(request: dict[str, object], **overrides: object) -> SendRequest:
    values: dict[str, object] = {
        "action_id": "run-1.entry",
        "run_id": "run-1",
        "slot": "entry",
        "attempt": 1,
        "client_order_id": "1-E",
        "venue": "binance",
        "account": "drill",
        "instrument": "BTCUSDT",
        "request_json": orjson.dumps(request).decode(),
        "timestamp_ms": 1_000,
        "recv_window_ms": 5_000,
        "send_by_ms": 6_000,
        "owner_instance": "gateway-1",
        "owner_generation": 1,
    }
    values.update(overrides)
    return SendRequest(**values)  # type: ignore[arg-type]


def test_settings_defaults_and_refusals() -> None:
    local = GatewaySettings.from_env({})
    assert (local.venue, local.venue_url, local.api_key) == (
        "paper",
        "http://127.0.0.1:8090",
        "paper-api-key",
    )
    assert local.local_paper and local.venue_listen == "127.0.0.1:8090"
    assert local.policy == JournalPolicy()  # 5 s window, 30 s quiet period, ...
    assert local.retention_ms == 7 * 86_400_000
    assert (
        GatewaySettings.from_env({"SLUICEGATE_GATEWAY_RETENTION": "2h"}).retention_ms == 7_200_000
    )
    assert (
        local.notify_url == "http://127.0.0.1:8090/paper/v1/notifications" and local.notify_lookup
    )
    with pytest.raises(GatewaySettingsError, match="SLUICEGATE_VENUE_API_KEY"):
        GatewaySettings.from_env(
            {
                "SLUICEGATE_VENUE": "binance",
                "SLUICEGATE_VENUE_URL": "https://testnet.binance.vision",
            }
        )
    binance = GatewaySettings.from_env(
        {
            "SLUICEGATE_VENUE": "binance",
            "SLUICEGATE_VENUE_API_KEY": "k",
            "SLUICEGATE_VENUE_API_SECRET": "s",
        }
    )
    assert not binance.local_paper and binance.notify_url is None
    for env, name in [
        ({"SLUICEGATE_VENUE": "kraken"}, "SLUICEGATE_VENUE"),
        ({"SLUICEGATE_VENUE_QUIET_PERIOD": "soon"}, "SLUICEGATE_VENUE_QUIET_PERIOD"),
        ({"SLUICEGATE_VENUE_RECV_WINDOW": "2m"}, "SLUICEGATE_VENUE_RECV_WINDOW"),
        ({"SLUICEGATE_GATEWAY_RECONCILIATION_BUDGET": "10s"}, "before absence can be proven"),
        ({"SLUICEGATE_NOTIFY_LOOKUP": "maybe"}, "SLUICEGATE_NOTIFY_LOOKUP"),
        ({"SLUICEGATE_GATEWAY_THREADS": "\u00b2"}, "SLUICEGATE_GATEWAY_THREADS"),
        ({"SLUICEGATE_GATEWAY_THREADS": "1" * 5000}, "SLUICEGATE_GATEWAY_THREADS"),
        ({"SLUICEGATE_GATEWAY_RETENTION": "119m"}, "SLUICEGATE_GATEWAY_RETENTION"),
        ({"SLUICEGATE_GATEWAY_RETENTION": "367d"}, "SLUICEGATE_GATEWAY_RETENTION"),
        ({"SLUICEGATE_GATEWAY_RETENTION": "forever"}, "SLUICEGATE_GATEWAY_RETENTION"),
    ]:
        with pytest.raises(GatewaySettingsError, match=name):
            GatewaySettings.from_env(env)


def test_dispatch_maps_the_gates_record_onto_the_cores_command() -> None:
    record = dispatch(at_ms=1_800_000_000_000)
    command = accept_dispatch(record, POLICY, None, "live")
    assert (command.action_id, command.kind, command.instrument, command.account) == (
        record.action_id,
        "entry",
        "BTCUSDT",
        "drill",
    )
    assert command.expires_at_ms == record.expires_at_ms and command.authorized_until_ms is None
    assert command.policy is POLICY
    approved = accept_dispatch(record, POLICY, 30_000, "backup")
    assert approved.authorized_until_ms == record.requested_at_ms + 30_000
    assert approved.journal_origin == "backup"
    open_ended = accept_dispatch(
        dataclasses.replace(record, expires_at_ms=None), POLICY, None, "live"
    )
    assert open_ended.expires_at_ms == NO_DEADLINE_MS
    assert generation_number("81", "number") == 81
    assert generation_number("2026-11-30T12:00:00Z", "time") == 1_796_040_000_000
    assert generation_number("soon", "time") == 0


def test_orders_from_recorded_requests() -> None:
    market = order_request(
        send({"kind": "entry", "side": "buy", "type": "market", "quantity": "0.5"})
    )
    assert (market.type, market.side, market.quantity) == (
        OrderType.MARKET,
        Side.BUY,
        Decimal("0.5"),
    )
    notional = order_request(
        send({"kind": "entry", "side": "buy", "type": "market", "notional": "100"})
    )
    assert (notional.quantity, notional.quote_quantity) == (None, Decimal("100"))
    limit = order_request(
        send(
            {
                "kind": "entry",
                "side": "sell",
                "type": "limit",
                "quantity": "1",
                "limit_price": "97000",
                "params": {"time_in_force": "ioc"},
            }
        )
    )
    assert (limit.type, limit.price, limit.time_in_force) == (
        OrderType.LIMIT,
        Decimal("97000"),
        TimeInForce.IOC,
    )
    with pytest.raises(Unsendable, match="protection needs a limit_price"):
        order_request(
            send({"kind": "protection", "side": "sell", "type": "market", "quantity": "1"})
        )
    with pytest.raises(Unsendable):
        order_request(send({"kind": "entry", "side": "long", "type": "market", "quantity": "1"}))


def _order(status: OrderStatus, executed: str) -> Accepted:
    return Accepted(
        "77",
        "1-E",
        "BTCUSDT",
        Side.BUY,
        OrderType.MARKET,
        status,
        Decimal("0.5"),
        Decimal(executed),
        Decimal("0"),
        fills=(Fill(Decimal("97000"), Decimal(executed), Decimal("0.0005"), "BTC", "9"),),
    )


@pytest.mark.parametrize(
    ("answer", "outcome", "code"),
    [
        (_order(OrderStatus.FILLED, "0.5"), "filled", None),
        (_order(OrderStatus.NEW, "0"), "acknowledged", None),
        (_order(OrderStatus.PARTIALLY_FILLED, "0.2"), "acknowledged", None),
        (_order(OrderStatus.EXPIRED, "0.2"), "filled", None),
        (_order(OrderStatus.EXPIRED, "0"), "rejected", None),
        (
            Rejected(RejectReason.DUPLICATE_CLIENT_ORDER_ID, -2010, "Duplicate order sent."),
            "rejected",
            "duplicate_client_order_id",
        ),
        (
            Rejected(RejectReason.OUTSIDE_RECV_WINDOW, -1021, "late"),
            "rejected",
            "outside_recv_window",
        ),
        (Unknown(UnknownReason.TIMEOUT, "no answer"), "unknown", None),
    ],
)
def test_send_answers_say_no_more_than_the_venue_did(
    answer: object, outcome: str, code: str | None
) -> None:
    mapped = venue_answered(send({}), answer, 2_000)  # type: ignore[arg-type]
    assert (mapped.outcome, mapped.error_code, mapped.observed_at_ms) == (outcome, code, 2_000)
    if isinstance(answer, Accepted):
        assert mapped.venue_order_id == "77"
        assert orjson.loads(mapped.fills_json or "[]")[0]["trade_id"] == "9"


def test_lookup_answers() -> None:
    lookup = LookupRequest("run-1.entry", "run-1", "entry", 3, "1-E", "binance", "drill", "BTCUSDT")
    found = lookup_answered(lookup, _order(OrderStatus.FILLED, "0.5"), 10, 12)
    assert (found.outcome, found.query_number, found.queried_at_ms) == ("filled", 3, 10)
    assert (
        lookup_answered(lookup, NotFound(-2013, "Order does not exist."), 10, 12).outcome
        == "not_found"
    )
    assert (
        lookup_answered(lookup, Unknown(UnknownReason.SERVER_ERROR, "5xx"), 10, 12).outcome
        == "unknown"
    )


def test_a_send_goes_only_until_send_by_and_its_window_ends_there() -> None:
    shell = Shell(GatewaySettings(), clock=lambda: 0, failpoints=Failpoints())
    fresh = send({}, timestamp_ms=1_000, send_by_ms=4_000)
    assert shell.expired(fresh, 3_999) is None
    late = shell.expired(fresh, 4_000)
    assert late is not None and late.outcome == "not_sent" and late.error_code == "stale_attempt"
    assert send_window_ms(fresh) == 3_000  # the deadline, not the 5 s window, ends it
    assert send_window_ms(send({}, timestamp_ms=1_000, send_by_ms=90_000)) == 5_000


def test_restored_runs_get_a_recovery_only_when_they_need_one() -> None:
    app = GatewayApp(
        load_settings({}),
        GatewaySettings(),
        instance_id="gateway-2",
        shell=Shell(GatewaySettings(), clock=lambda: 0, failpoints=Failpoints()),
    )
    app.on_assigned(4)
    world = World()
    world.decide(journal_dispatch())
    in_flight = world.state
    assert in_flight is not None
    command = app.on_restored(in_flight.run_id, in_flight, 123)
    assert isinstance(command, RecoverRun)
    assert (command.journal_origin, command.requested_by, command.requested_at_ms) == (
        "live",
        "gateway-2",
        123,
    )
    world.settle()
    assert world.state is not None and app.on_restored(world.state.run_id, world.state, 1) is None
    app.journal_restored = True
    fenced = app.on_restored(world.state.run_id, world.state, 1)
    assert isinstance(fenced, RecoverRun) and fenced.journal_origin == "backup"
    assert app.unfenced == 1


def test_serve_runs_the_gateway_and_a_local_paper_venue_first() -> None:
    assert components_for(GatewaySettings())[:4] == ["venue", "processor", "gate", "gateway"]
    remote = GatewaySettings(venue="binance", venue_url="https://testnet.binance.vision")
    assert "venue" not in components_for(remote) and "gateway" in components_for(remote)


class _TimedOutVenue:
    """A venue whose every order's outcome is unknown (the read timed out)."""

    def place(self, order: object, attempt: object) -> Unknown:
        return Unknown(UnknownReason.TIMEOUT, "read timed out")


def test_a_sent_orders_log_line_carries_the_ids_a_log_pipeline_selects_it_by(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = iter((1_012, 1_040)).__next__
    shell = Shell(
        GatewaySettings(),
        clock=clock,
        failpoints=Failpoints(),
        venue_factory=lambda _settings: _TimedOutVenue(),  # type: ignore[arg-type,return-value]
    )
    order: dict[str, object] = {"kind": "entry", "side": "buy", "type": "market", "quantity": "0.5"}
    with caplog.at_level(logging.INFO, logger="sluicegate.gateway"):
        shell.perform(send(order))
    (record,) = [r for r in caplog.records if r.getMessage().startswith("sent ")]
    assert record.getMessage() == (
        "sent run-1.entry attempt 1: Unknown(timeout) (40 ms after its attempt time)"
    )
    assert record.fields == {  # type: ignore[attr-defined]
        "run_id": "run-1",
        "action_id": "run-1.entry",
        "attempt": 1,
        "client_order_id": "1-E",
        "venue": "binance",
        "account": "drill",
        "instrument": "BTCUSDT",
        "answer": "Unknown(timeout)",
        "after_ms": 40,
    }
