"""The execution gateway on the real broker with a real paper venue process.

One gateway process (``sluicegate gateway``) and one venue process (``sluicegate venue``),
both ended by their pid. Dispatches are the gate's ``ActionDispatched`` records (built by the
real gate core) produced onto ``actions`` at a steady rate. Afterwards: exactly one venue
order per entry and protection, one notification per run at the venue's sink, every action
with a receipt, the read side (stats, holds, timeline, ``GET /v1/holds``, ``/metrics``) and
the operator commands (``holds resolve``, ``recover``) through the CLI; and the send latency
from ``ActionDispatched`` to the venue's answer, at that steady rate.
"""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from projections.http import add_read_routes
from projections.projector import Projector
from schemas.codec import decode
from schemas.events import (
    ActionDispatched,
    ActionIntended,
    ExposureRecorded,
    ReceiptRecorded,
    RecoveryReceiptRecorded,
    RunCheckpointed,
)
from schemas.topics import ACTIONS
from sluicegate.cli import main
from streams.kafka.topics import ensure_topics
from streams.settings import Settings
from tests.support import gateway as g
from tests.support.history import cleanup
from tests.support.kafka import read_topic, unique_settings, wait_until
from tests.support.venue import VenueProcess, running_venue

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

RUNS = 60
RATE_PER_S = 20
SLOTS = ("entry", "protection", "notification")
REPORT = Path("var/test-reports/gateway-latency.txt")


@dataclass
class World:
    settings: Settings
    venue: VenueProcess
    gateway: g.GatewayProcess
    runs: list[str] = field(default_factory=list)
    invalid: str = ""
    expired: str = ""
    records: list[Any] = field(default_factory=list)

    def refresh(self) -> list[Any]:
        self.records = g.journal(self.settings)
        return self.records

    def of(self, kind: type, run_id: str | None = None) -> list[Any]:
        return [
            r
            for r in self.records
            if isinstance(r, kind) and (run_id is None or getattr(r, "run_id", None) == run_id)
        ]


def _finished(world: World) -> bool:
    done = {
        r.run_id for r in world.refresh() if isinstance(r, RunCheckpointed) and r.next_tasks == ()
    }
    extra = {world.invalid, world.expired} - {""}
    return set(world.runs) | extra <= done


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    settings = unique_settings(partitions=3)
    ensure_topics(settings)
    directory = tmp_path_factory.mktemp("gateway")
    with running_venue(directory, g.DRILL_VENUE) as venue:
        gateway = g.GatewayProcess(settings, venue, directory)
        gateway.start()
        world = World(settings, venue, gateway)
        try:
            # The first run alone: its protection is sized from exactly what it bought.
            producer = g.ActionsProducer(settings)
            first = g.dispatch()
            producer.send([first])
            world.runs.append(first.run_id)
            wait_until(lambda: _finished(world), timeout_s=60)
            started = time.monotonic()
            for n in range(RUNS - 1):
                record = g.dispatch()
                producer.send([record])
                world.runs.append(record.run_id)
                ahead = (n + 1) / RATE_PER_S - (time.monotonic() - started)
                if ahead > 0:
                    time.sleep(ahead)
            invalid = replace(g.dispatch(), account=None)
            world.invalid = invalid.run_id
            # Dispatched 50 ms before its deadline (minus the clock uncertainty): it can only
            # reach the gateway's final re-check after that, and expires there, unsent.
            late = g.dispatch(window_ms=2_100)
            world.expired = late.run_id
            producer.send([invalid, late])
            wait_until(lambda: _finished(world), timeout_s=120)
            yield world
        finally:
            gateway.stop()
            cleanup(settings)


def test_every_action_is_sent_once_and_ends_with_a_receipt(world: World) -> None:
    ids = [g.client_id(run, slot) for run in world.runs for slot in ("entry", "protection")]
    orders = g.venue_orders(world.venue, ids)
    assert set(orders.values()) == {1}, orders
    sink = g.notifications(world.venue)
    for run in world.runs:
        assert sink[g.client_id(run, "notification")]["posts"] == 1
        definitive = {
            r.slot: r.outcome
            for r in world.of(ReceiptRecorded, run)
            if r.outcome != "unknown" and r.conflict is None
        }
        assert definitive == {
            "entry": "filled",
            "protection": "acknowledged",
            "notification": "acknowledged",
        }
    # Each action was attempted once: nothing was ever resent.
    attempts = Counter(
        (r.run_id, r.slot) for r in world.records if type(r).__name__ == "AttemptStarted"
    )
    assert set(attempts.values()) == {1}


def test_the_protection_is_sized_from_the_exposure_the_venue_reports(world: World) -> None:
    first = world.runs[0]
    [exposure] = world.of(ExposureRecorded, first)
    # The account held no BTC: the venue reports the fill minus its 0.1% commission, which
    # is also what the entry's fills brought the account.
    assert (exposure.exposure_quantity, exposure.entry_executed_quantity) == ("0.00999", "0.00999")
    [intent] = [i for i in world.of(ActionIntended, first) if i.slot == "protection"]
    assert (intent.quantity, intent.side, intent.limit_price) == ("0.00999", "sell", "99000")
    # Every run's protection covers what its own entry brought, so none takes another's.
    for run in world.runs:
        [sized] = world.of(ExposureRecorded, run)
        [protection] = [i for i in world.of(ActionIntended, run) if i.slot == "protection"]
        assert protection.quantity == sized.sized_quantity == "0.00999"


def test_send_latency_from_dispatch_to_the_venues_answer(world: World) -> None:
    produced = {}
    for message in read_topic(world.settings, world.settings.topic(ACTIONS)):
        record = decode(message.value() or b"")
        if isinstance(record, ActionDispatched):
            produced[record.run_id] = message.timestamp()[1]
    latencies = sorted(
        r.observed_at_ms - produced[r.run_id]
        for r in world.of(ReceiptRecorded)
        if r.slot == "entry" and r.source == "send_response" and r.run_id in world.runs[1:]
    )
    assert len(latencies) == RUNS - 1
    p50 = statistics.median(latencies)
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    line = (
        f"gateway send latency, ActionDispatched produced -> venue answer observed, "
        f"{len(latencies)} entries at {RATE_PER_S}/s (each with a protection and a "
        f"notification): p50 {p50:.0f} ms, p99 {p99:.0f} ms, max {latencies[-1]} ms\n"
    )
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(line)
    print("\n" + line)


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _timeline_rows(table: str) -> dict[str, list[str]]:
    """The rows of ``runs timeline``'s events table by record type, in order (after its
    CANDIDATES table, when the run has one)."""
    rows: dict[str, list[str]] = {}
    lines = table.splitlines()
    if "EVENTS" in lines:
        lines = lines[lines.index("EVENTS") + 1 :]
    for line in lines[1:]:
        rows.setdefault(line.split()[3], []).append(line.rstrip())
    return rows


def _read(settings: Settings, path: str) -> tuple[int, Any]:
    async def go() -> tuple[int, Any]:
        app = web.Application()
        add_read_routes(app, settings)
        async with TestClient(TestServer(app)) as client:
            response = await client.get(path)
            body = await response.text()
            return response.status, body

    return asyncio.run(go())


def test_read_side_and_operator_commands(
    world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLUICEGATE_TOPIC_PREFIX", world.settings.topic_prefix)
    projector = Projector(world.settings)
    follow = threading.Thread(target=projector.run, daemon=True)
    follow.start()
    try:
        invalid = f"{world.invalid}.entry"

        def held() -> bool:
            code, out, _ = _cli(capsys, "holds", "list", "--json")
            return code == 0 and [h["action_id"] for h in orjson.loads(out)["holds"]] == [invalid]

        expected = {
            "actions_dispatched": RUNS + 2,
            "unresolved_attempt": 0,
            "holds": 1,
            "expired_before_send": 1,
        }

        def counts() -> dict[str, int]:
            stats = orjson.loads(_cli(capsys, "stats", "--json")[1])
            return {name: stats[name] for name in expected}

        # The projector follows each topic at its own pace: the hold (journal) can be in the
        # tables before the dispatches (actions) are, so wait for both.
        wait_until(lambda: held() and counts() == expected, timeout_s=60, what="the counts")
        assert counts() == expected
        status, body = _read(world.settings, "/v1/holds")
        [hold] = orjson.loads(body)["holds"]
        assert status == 200
        assert (hold["action_id"], hold["owner"], hold["reason"]) == (
            invalid,
            "gateway-1",
            "invalid_dispatch",
        )
        assert "account is missing" in hold["detail"]

        code, out, err = _cli(
            capsys, "holds", "resolve", invalid, "--resolution", "abandon", "--reason", "no account"
        )
        assert code == 0, err
        assert f"{invalid}: abandon by" in out
        wait_until(lambda: orjson.loads(_cli(capsys, "holds", "list", "--json")[1])["holds"] == [])
        code, out, _ = _cli(capsys, "holds", "list", "--all", "--json")
        [audit] = orjson.loads(out)["holds"]
        assert (audit["resolution"], audit["resolution_reason"]) == ("abandon", "no account")
        status, metrics = _read(world.settings, "/metrics")
        assert "sluicegate_holds 0" in metrics and "sluicegate_unresolved_attempt 0" in metrics

        # A recovery of a finished run re-checks it and changes nothing.
        run = world.runs[0]
        code, out, err = _cli(capsys, "recover", "--run", run, "--json")
        assert code == 0, err
        receipt = orjson.loads(out)["runs"][run]
        assert receipt["next_permitted"] == [] and receipt["owner_instance"] == "gateway-1"
        assert receipt["checkpoint_advanced_to"] is None

        code, out, _ = _cli(capsys, "runs", "timeline", run, "--json")
        types = [orjson.loads(line)["type"] for line in out.splitlines()]
        for kind in ("ActionDispatched", "ActionIntended", "AttemptStarted", "ReceiptRecorded"):
            assert kind in types
        assert types.count("RunCheckpointed") == 4 and "RecoveryReceiptRecorded" in types

        # The journal's tables are rebuilt from the topics like every other table.
        code, out, err = _cli(capsys, "projections", "rebuild", "--verify", "--no-progress")
        assert code == 0, out + err
        assert "verify: no differences" in err

        # The readable timeline says what each journal record established.
        code, out, _ = _cli(capsys, "runs", "timeline", run)
        assert code == 0
        rows = _timeline_rows(out)
        [filled] = [r for r in world.of(ReceiptRecorded, run) if r.slot == "entry"]
        assert (
            f"entry attempt=1 outcome=filled venue_order_id={filled.venue_order_id}"
            in rows["ReceiptRecorded"][0]
        )
        assert "entry attempt=1 reason=first owner=gateway-1" in rows["AttemptStarted"][0]
        assert rows["RunCheckpointed"][0].endswith("C1 next=entry")
        assert rows["RunCheckpointed"][-1].endswith("C4 next=-")
        assert "restored=C4 next=- consulted=" in rows["RecoveryReceiptRecorded"][0]
    finally:
        projector.stop.set()
        follow.join(30)
        projector.close()
    world.refresh()
    assert len(world.of(RecoveryReceiptRecorded, world.runs[0])) == 1
    assert set(g.venue_orders(world.venue, [g.client_id(world.runs[0], "entry")]).values()) == {1}
