"""The read side over HTTP (``projections.http.add_read_routes``) on a real projection."""

from __future__ import annotations

import asyncio
import random
import urllib.parse
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import psycopg
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from projections import queries
from projections.db import schema_name
from projections.http import add_read_routes
from projections.projector import Projector
from projections.queries import STATS_KEYS
from schemas.events import DeliveryDeduplicated, RunAdmitted
from streams.kafka.topics import ensure_topics
from streams.settings import Settings
from tests.support.history import build_history, cleanup, produce_history
from tests.support.kafka import unique_settings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


class World:
    def __init__(self) -> None:
        self.settings = unique_settings(partitions=6)
        ensure_topics(self.settings)
        rng = random.Random(41)
        self.history = build_history(rng, 40)
        produce_history(self.settings, self.history, rng=rng)
        with Projector(self.settings) as projector:
            projector.run_until(timeout_s=60)


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    w = World()
    yield w
    cleanup(w.settings)


def with_client(
    settings: Settings, body: Callable[[TestClient[Any, Any]], Awaitable[None]]
) -> None:
    async def main() -> None:
        app = web.Application()
        add_read_routes(app, settings)
        async with TestClient(TestServer(app)) as client:
            await body(client)

    asyncio.run(main())


def test_run_found_and_not_found(world: World) -> None:
    admitted = next(e.record for e in world.history if isinstance(e.record, RunAdmitted))

    async def body(client: TestClient[Any, Any]) -> None:
        response = await client.get(f"/v1/runs/{admitted.run_id}")
        assert response.status == 200
        run = await response.json()
        assert run["run_id"] == admitted.run_id
        assert run["expires_at_ms"] == admitted.expires_at_ms
        assert [s["slot"] for s in run["slots"]] == list(admitted.slots)

        for bad in ("no-such-run", "x'; DROP TABLE runs; --", "%00", "\x00", "a\x00b"):
            response = await client.get("/v1/runs/" + urllib.parse.quote(bad, safe=""))
            assert response.status == 404
            error = (await response.json())["error"]
            assert error["code"] == "run_not_found"
            assert "sluicegate projector" in error["message"]
            assert error["problems"] == []

    with_client(world.settings, body)


def test_occurrence_by_url_encoded_key(world: World) -> None:
    duplicate = next(e.record for e in world.history if isinstance(e.record, DeliveryDeduplicated))
    key = duplicate.admission_key
    assert "/" in key

    async def body(client: TestClient[Any, Any]) -> None:
        for path in (urllib.parse.quote(key, safe=""), key):
            response = await client.get(f"/v1/occurrences/{path}")
            assert response.status == 200, path
            found = await response.json()
            assert found["admission_key"] == key
            outcomes = {d["delivery_id"]: d["outcome"] for d in found["deliveries"]}
            assert outcomes[duplicate.delivery_id] == "deduplicated"
        for bad in ("a/b'c", "\x00"):
            response = await client.get("/v1/occurrences/" + urllib.parse.quote(bad, safe=""))
            assert response.status == 404
            assert (await response.json())["error"]["code"] == "occurrence_not_found"

    with_client(world.settings, body)


HOSTILE_KEYS = (
    "\x00",
    "a\x00b",
    "x'; DROP TABLE runs; --",
    "%",
    "_",
    "\\",
    "\u00e9\U0001f680",
    "k" * 4000,
)
"""Keys no projection holds: NUL (PostgreSQL text cannot hold it), SQL, LIKE wildcards,
non-ASCII, long. Each key route answers them with its own 404, never 5xx."""


@pytest.mark.parametrize(
    ("route", "code"),
    [
        ("/v1/runs/", "run_not_found"),
        ("/v1/occurrences/", "occurrence_not_found"),
        ("/v1/scopes/", "scope_not_found"),
    ],
)
def test_every_key_route_answers_a_key_nothing_can_match_with_its_404(
    world: World, route: str, code: str
) -> None:
    async def body(client: TestClient[Any, Any]) -> None:
        for bad in HOSTILE_KEYS:
            response = await client.get(route + urllib.parse.quote(bad, safe=""))
            assert response.status == 404, (route, bad[:20], await response.text())
            error = (await response.json())["error"]
            assert error["code"] == code, (route, bad[:20])
            assert error["problems"] == []

    with_client(world.settings, body)


def test_lookups_of_values_no_text_column_can_hold_find_nothing(world: World) -> None:
    """A lone surrogate (an argument's bytes that were not UTF-8) or a NUL matches nothing;
    asking PostgreSQL would raise instead."""
    schema = schema_name(world.settings.topic_prefix)
    with psycopg.connect(world.settings.pg_dsn, autocommit=True) as conn:
        for bad in ("\udcff\udcfe", "a\x00b"):
            assert queries.get_run(conn, schema, bad) is None
            assert queries.get_timeline(conn, schema, bad) is None
            assert queries.get_occurrence(conn, schema, bad) is None
            assert queries.get_scope(conn, schema, bad) is None
            assert queries.get_run_candidates(conn, schema, bad) == []


def test_stats_and_metrics(world: World) -> None:
    async def body(client: TestClient[Any, Any]) -> None:
        response = await client.get("/v1/stats")
        assert response.status == 200
        stats = await response.json()
        assert list(stats) == list(STATS_KEYS)
        runs = sum(1 for e in world.history if isinstance(e.record, RunAdmitted))
        assert stats["runs_admitted"] == runs

        response = await client.get("/metrics")
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = await response.text()
        assert "# TYPE sluicegate_runs_admitted_total counter" in text
        assert f"sluicegate_runs_admitted_total {runs}" in text
        assert "# TYPE sluicegate_holds gauge" in text
        for reason, count in stats["duplicates"].items():
            assert f'sluicegate_duplicates_total{{reason="{reason}"}} {count}' in text
        assert 'sluicegate_projection_offset{topic="runs",partition="0"}' in text

    with_client(world.settings, body)


def test_no_projection_is_a_503_with_the_error_shape() -> None:
    settings = unique_settings(partitions=6)

    async def body(client: TestClient[Any, Any]) -> None:
        for path in ("/v1/stats", "/v1/runs/x", "/v1/occurrences/x", "/metrics"):
            response = await client.get(path)
            assert response.status == 503, path
            error = (await response.json())["error"]
            assert error["code"] == "projection_unavailable"
            assert "sluicegate projector" in error["message"]

    with_client(settings, body)
