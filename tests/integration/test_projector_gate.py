"""The projection of what the real gate writes: candidates, scopes and the gate's counts.

One scope sees a dispatch, a supersession by a newer generation, an older candidate that
arrives last, a request after the deadline, and a proposal the gate cannot read; the
projector then answers ``stats``, ``scopes show`` and ``GET /v1/scopes/{key}``, and
``projections rebuild --verify`` finds the rebuilt tables equal.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import urllib.parse
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from projections import queries
from projections.http import add_read_routes
from projections.projector import Projector
from schemas.events import CandidateAccepted
from tests.support.gate import SCOPE, T0, proposal, request
from tests.support.gate_broker import Decisions, GateHarness
from tests.support.history import cleanup

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

SLUICEGATE = str(Path(sys.executable).parent / "sluicegate")
NOW = T0 + 1_000


@pytest.fixture()
def gate() -> Iterator[GateHarness]:
    h = GateHarness(partitions=3)
    h.start()
    yield h
    h.close()
    cleanup(h.settings)


def _cli(gate: GateHarness, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(
        os.environ,
        SLUICEGATE_TOPIC_PREFIX=gate.settings.topic_prefix,
        SLUICEGATE_PARTITIONS=str(gate.settings.partitions),
    )
    return subprocess.run(
        [SLUICEGATE, *args], env=env, capture_output=True, text=True, timeout=90, check=False
    )


def with_client(gate: GateHarness, body: Callable[[TestClient[Any, Any]], Awaitable[None]]) -> None:
    async def main() -> None:
        app = web.Application()
        add_read_routes(app, gate.settings)
        async with TestClient(TestServer(app)) as client:
            await body(client)

    asyncio.run(main())


def test_the_gate_projects_candidates_scopes_and_counts(gate: GateHarness) -> None:
    g81, g82, g83 = proposal(81), proposal(82), proposal(83)
    late = proposal(80)  # older than the current one, arriving last
    unreadable = proposal(84, quantity=None)  # neither quantity nor notional
    gate.send(g81, g82, request(g81, NOW), request(g82, NOW))  # 81 superseded, 82 dispatched
    gate.send(g83, request(g83, NOW, expires_at_ms=NOW))  # 83: the copy's deadline is now
    gate.send(late, unreadable)

    def settled(d: Decisions) -> bool:
        return len(d.decisions) + len(d.dispatched) >= 8

    gate.wait_for(settled)
    Projector(gate.settings).run_until(timeout_s=90)
    with queries.reader(gate.settings) as (conn, schema):
        stats = queries.get_stats(conn, schema)
        scope = queries.get_scope(conn, schema, SCOPE)
        candidates = queries.get_run_candidates(conn, schema, g82.run_id)
    assert (stats["actions_dispatched"], stats["superseded"], stats["expired_before_send"]) == (
        1,
        2,
        1,
    )
    assert scope is not None
    assert [(c["kind"], c["generation"]) for c in scope["current"]] == [("entry", "83")]
    assert scope["pending"] == []
    outcomes = {d["candidate_id"]: (d["outcome"], d["reason"]) for d in scope["recent"]}
    assert outcomes == {
        g81.candidate_id: ("superseded", "newer_generation"),
        g82.candidate_id: ("dispatched", None),
        g83.candidate_id: ("expired", "expired_before_send"),
        late.candidate_id: ("superseded", "older_than_current"),
        unreadable.candidate_id: ("rejected", "invalid_parameters"),
    }
    [row] = candidates
    assert (row["outcome"], row["final_at_ms"], row["current_generation"]) == (
        "dispatched",
        NOW,
        "82",
    )
    assert (row["source_time_ms"], row["enqueued_at_ms"], row["dequeued_at_ms"]) == (
        g82.source_time_ms,
        g82.enqueued_at_ms,
        g82.dequeued_at_ms,
    )

    shown = _cli(gate, "scopes", "show", SCOPE, "--json")
    assert shown.returncode == 0, shown.stderr
    assert orjson.loads(shown.stdout)["current"][0]["candidate_id"] == g83.candidate_id
    table = _cli(gate, "scopes", "show", SCOPE)
    assert "older_than_current" in table.stdout and "RECENT DECISIONS" in table.stdout
    unknown = _cli(gate, "scopes", "show", "paper|account=nobody")
    assert unknown.returncode == 1 and "decision scope" in unknown.stderr
    stats_out = _cli(gate, "stats", "--json")
    assert orjson.loads(stats_out.stdout)["superseded"] == 2

    async def http(client: TestClient[Any, Any]) -> None:
        response = await client.get("/v1/scopes/" + urllib.parse.quote(SCOPE, safe=""))
        assert response.status == 200
        body = await response.json()
        assert body["current"][0]["generation"] == "83"
        missing = await client.get("/v1/scopes/paper%7Caccount%3Dnobody")
        assert missing.status == 404
        assert (await missing.json())["error"]["code"] == "scope_not_found"

    with_client(gate, http)

    verify = _cli(gate, "projections", "rebuild", "--verify")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert len([d for d in gate.read().decisions if isinstance(d, CandidateAccepted)]) == 3
