"""Holds are listed a page at a time, over HTTP and from the command line.

Each hold is an order whose outcome nobody knows; a venue outage can hold one per run it was
sending. ``GET /v1/holds`` (and ``?all=true``, every hold ever made with its resolution)
answered every one of them in one body, like the lists ``projections/pages.py`` pages: now
they come ``from``/``limit`` at a time (100 by default), counted in full. Holds written as
the gateway writes them (``ActionHeld``, ``HoldResolved``), through the real broker and
projector into PostgreSQL.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient

from projections.projector import Projector
from schemas.events import ActionHeld, HoldResolved
from schemas.topics import JOURNAL
from sluicegate.cli import main
from streams.kafka.topics import ensure_topics
from streams.settings import Settings
from tests.integration.test_read_cli_http import with_client
from tests.support.history import Emitted, cleanup, produce_history
from tests.support.kafka import unique_settings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

HELD = 7
RESOLVED = 3
T0 = 1_796_000_000_000


def _hold(n: int) -> ActionHeld:
    run = f"run-{n:024x}"
    return ActionHeld(
        f"{run}.entry", run, "entry", 1, "gateway-1", "unknown_outcome", f"hold {n}", T0 + n
    )


@pytest.fixture
def settings() -> Iterator[Settings]:
    s = unique_settings(partitions=3)
    ensure_topics(s)
    holds = [_hold(n) for n in range(HELD + RESOLVED)]
    resolutions = [
        HoldResolved(
            h.action_id,
            h.run_id,
            h.slot,
            "abandon",
            "ops",
            "gone",
            h.reason,
            h.held_since_ms,
            T0 + 1_000 + n,
        )
        for n, h in enumerate(holds[HELD:])
    ]
    records = [Emitted(JOURNAL.name, h.run_id, h) for h in holds]
    records += [Emitted(JOURNAL.name, r.run_id, r) for r in resolutions]
    produce_history(s, records, rng=random.Random(3), abort_every=0)
    with Projector(s) as projector:
        projector.run_until(timeout_s=60)
    try:
        yield s
    finally:
        cleanup(s)


def _actions(body: dict[str, Any]) -> list[str]:
    return [h["action_id"] for h in body["holds"]]


def test_the_holds_come_a_page_at_a_time_and_are_counted_in_full(settings: Settings) -> None:
    open_ids = [_hold(n).action_id for n in range(HELD)]
    every_id = [_hold(n).action_id for n in range(HELD + RESOLVED)]

    async def read(client: TestClient[Any, Any]) -> None:
        first = await (await client.get("/v1/holds?limit=3")).json()
        assert _actions(first) == open_ids[:3]
        assert (first["total"], first["page"]) == (HELD, {"from": 0, "limit": 3, "next": 3})
        last = await (await client.get("/v1/holds?from=6&limit=3")).json()
        assert _actions(last) == open_ids[6:] and last["page"]["next"] is None
        audit = await (await client.get("/v1/holds?all=true&from=5&limit=4")).json()
        assert _actions(audit) == every_id[5:9] and audit["total"] == HELD + RESOLVED
        assert [h["resolution"] for h in audit["holds"]] == [None, None, "abandon", "abandon"]
        whole = await (await client.get("/v1/holds")).json()
        assert _actions(whole) == open_ids and whole["page"]["limit"] == 100
        for query in ("limit=0", "limit=1001", "from=-1", "from=x"):
            refused = await client.get(f"/v1/holds?{query}")
            assert refused.status == 400
            assert (await refused.json())["error"]["code"] == "invalid_query"

    with_client(settings, read)


def test_the_command_lists_a_page_and_says_where_it_stands(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SLUICEGATE_TOPIC_PREFIX", settings.topic_prefix)
    assert main(["holds", "list", "--limit", "3", "--from", "3"]) == 0
    out = capsys.readouterr().out
    assert _hold(3).action_id in out and _hold(2).action_id not in out
    assert out.rstrip().endswith(f"holds 4-6 of {HELD}; --from 6 for more")
    assert main(["holds", "list", "--json", "--all", "--limit", "2"]) == 0
    body = orjson.loads(capsys.readouterr().out)
    assert body["total"] == HELD + RESOLVED and body["page"]["next"] == 2
    assert main(["holds", "list"]) == 0
    assert "for more" not in capsys.readouterr().out, "a whole list says nothing of pages"
