"""A read of an occurrence or a run's timeline costs one page, however many times senders
delivered the occurrence.

A sender stuck in a retry loop delivers one occurrence hundreds of thousands of times; every
copy is a row of the read model and a record of the run's timeline. Before,
``GET /v1/occurrences/{key}`` listed them all: with 1,000,000 copies here one read answered
309 MB after 11 s, the ingest process (which serves the webhook too) went from 80 to 750 MiB,
and its webhook answered nothing for 5.3 s; ``runs timeline`` did not finish within the read
timeout. Now reads list one page (``from``, ``limit``) and count them all.

Real PostgreSQL, a real projection and a real ``sluicegate ingest`` process; the copies are
written straight into the read model (as the projector would write them) to keep it short.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from projections import queries
from projections.db import connect, schema_name
from projections.projector import Projector
from schemas.events import RunAdmitted
from streams.kafka.topics import ensure_topics
from streams.settings import Settings
from tests.support.component_process import ComponentProcess
from tests.support.history import build_history, cleanup, produce_history
from tests.support.kafka import unique_settings
from tests.support.ports import free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

REPO = Path(__file__).resolve().parents[2]
SLUICEGATE = REPO / ".venv" / "bin" / "sluicegate"
COPIES = 200_000
WALKED = 2_500


@dataclass
class World:
    settings: Settings
    flooded: str  # admission key delivered COPIES more times
    flooded_run: str
    walked: str  # admission key delivered WALKED more times


def _copy(settings: Settings, run_id: str, copies: int, tag: str, offsets: int) -> None:
    """``copies`` more deliveries of ``run_id``'s occurrence, each deduplicated to it, at
    offsets from ``offsets`` on."""
    schema = schema_name(settings.topic_prefix)
    with connect(settings.pg_dsn, autocommit=True) as conn:
        conn.execute(
            f"INSERT INTO {schema}.deliveries SELECT %(tag)s || g, subscription, environment, "
            "admission_key, source, event_id, payload_json, admitted_at_ms + g, 'webhook', 0, "
            f"%(offsets)s + g FROM {schema}.runs, generate_series(1, %(n)s) g "
            "WHERE run_id = %(run)s",
            {"tag": tag, "n": copies, "run": run_id, "offsets": offsets},
        )
        conn.execute(
            f"INSERT INTO {schema}.delivery_outcomes (delivery_id, admission_key, run_id, "
            "outcome, received_at_ms, decided_at_ms) SELECT %(tag)s || g, admission_key, "
            f"run_id, 'deduplicated', admitted_at_ms + g, admitted_at_ms + g FROM {schema}.runs, "
            "generate_series(1, %(n)s) g WHERE run_id = %(run)s",
            {"tag": tag, "n": copies, "run": run_id},
        )
        # Each copy's AdmitDelivery, as the projector logs it for timelines.
        conn.execute(
            f"INSERT INTO {schema}.event_log SELECT e.src_topic, e.src_partition, "
            "%(offsets)s + g, e.type, e.key, e.run_id, e.admission_key, %(tag)s || g, "
            "e.subscription, e.environment, e.scope_key, e.time_ms + g, e.kafka_ts_ms + g, "
            f"e.record FROM (SELECT l.* FROM {schema}.event_log l JOIN {schema}.runs r "
            "ON r.admission_key = l.admission_key WHERE r.run_id = %(run)s "
            "AND l.type = 'AdmitDelivery' LIMIT 1) e, generate_series(1, %(n)s) g",
            {"tag": tag, "n": copies, "run": run_id, "offsets": offsets},
        )


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    settings = unique_settings(partitions=3)
    ensure_topics(settings)
    rng = random.Random(11)
    history = build_history(rng, 3)
    produce_history(settings, history, rng=rng)
    with Projector(settings) as projector:
        projector.run_until(timeout_s=60)
    runs = [e.record for e in history if isinstance(e.record, RunAdmitted)]
    first = next(r for r in runs if r.rerun_of is None)
    second = next(r for r in runs if r.admission_key != first.admission_key)
    try:
        _copy(settings, first.run_id, COPIES, "flood-", 10_000_000)
        _copy(settings, second.run_id, WALKED, "walk-", 20_000_000)
        yield World(settings, first.admission_key, first.run_id, second.admission_key)
    finally:
        cleanup(settings)


def _all_deliveries(settings: Settings, key: str) -> list[str]:
    """Every delivery id of the occurrence, in the order the read model lists them."""
    with connect(settings.pg_dsn) as conn:
        found = queries.get_occurrence(
            conn, schema_name(settings.topic_prefix), key, limit=COPIES * 2
        )
    assert found is not None
    return [d["delivery_id"] for d in found["deliveries"]]


def test_pages_list_every_delivery_once_in_order(world: World) -> None:
    expected = _all_deliveries(world.settings, world.walked)
    assert len(expected) > WALKED
    seen: list[str] = []
    counts: dict[str, Any] = {}
    start: int | None = 0
    with connect(world.settings.pg_dsn) as conn:
        while start is not None:
            found = queries.get_occurrence(
                conn,
                schema_name(world.settings.topic_prefix),
                world.walked,
                start=start,
                limit=1000,
            )
            assert found is not None
            assert found["deliveries_page"]["from"] == start
            assert len(found["deliveries"]) <= 1000
            seen += [d["delivery_id"] for d in found["deliveries"]]
            counts = found["delivery_counts"]
            start = found["deliveries_page"]["next"]
    assert seen == expected
    assert counts["total"] == len(expected)
    assert counts["deduplicated"] >= WALKED
    assert sum(n for outcome, n in counts.items() if outcome != "total") == len(expected)


def _rss_mib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) // 1024


async def _get(session: aiohttp.ClientSession, url: str) -> tuple[int, Any]:
    async with session.get(url) as response:
        return response.status, json.loads(await response.read())


def test_an_occurrence_read_over_http_lists_one_page_and_counts_every_delivery(
    world: World, tmp_path: Path
) -> None:
    webhook, read = free_port(), free_port()
    base = f"http://127.0.0.1:{read}/v1/occurrences/{world.flooded}"
    ingest = ComponentProcess(
        world.settings,
        "ingest",
        log_path=tmp_path / "ingest.log",
        env={
            "SLUICEGATE_PG_DSN": world.settings.pg_dsn,
            "SLUICEGATE_HTTP": f"127.0.0.1:{webhook}",
            "SLUICEGATE_READ_HTTP": f"127.0.0.1:{read}",
        },
    )

    async def scenario(pid: int) -> None:
        async with aiohttp.ClientSession() as session:
            for _ in range(300):
                assert ingest.alive(), ingest.log_tail()
                try:
                    if (await _get(session, f"http://127.0.0.1:{read}/v1/stats"))[0] == 200:
                        break
                except aiohttp.ClientConnectionError:
                    pass
                await asyncio.sleep(0.2)
            before = _rss_mib(pid)
            status, found = await _get(session, base)
            grew = _rss_mib(pid) - before
            assert status == 200, found
            assert len(found["deliveries"]) == 100
            total = found["delivery_counts"]["total"]
            assert total > COPIES
            assert found["delivery_counts"]["deduplicated"] >= COPIES
            assert found["deliveries_page"] == {"from": 0, "limit": 100, "next": 100}
            assert [r["run_id"] for r in found["runs"]]
            # 200,000 listed deliveries made the process about 180 MiB larger.
            assert grew < 40, f"ingest grew {grew} MiB for one read"

            status, last = await _get(session, f"{base}?from={total - 3}&limit=1000")
            assert status == 200, last
            assert len(last["deliveries"]) == 3
            assert last["deliveries_page"] == {"from": total - 3, "limit": 1000, "next": None}
            status, past = await _get(session, f"{base}?from={total + 5}")
            assert status == 200 and past["deliveries"] == []
            assert past["delivery_counts"]["total"] == total

            for query in ("from=-1", "from=x", "from=%C2%B2", "limit=0", "limit=1001", "limit="):
                status, refused = await _get(session, f"{base}?{query}")
                assert status == 400, (query, refused)
                assert refused["error"]["code"] == "invalid_query", refused
                assert refused["error"]["problems"][0]["field"] in ("from", "limit")

    ingest.start()
    try:
        assert ingest.process is not None
        asyncio.run(scenario(ingest.process.pid))
    finally:
        ingest.stop()
    assert ingest.process.returncode == 0, ingest.log_tail()
    assert "Traceback" not in ingest.log_tail(10**6)


def _cli(world: World, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SLUICEGATE), *args],
        env={
            **os.environ,
            "SLUICEGATE_TOPIC_PREFIX": world.settings.topic_prefix,
            "SLUICEGATE_PG_DSN": world.settings.pg_dsn,
        },
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_command_shows_one_page_and_says_how_to_see_the_next(world: World) -> None:
    def show(*args: str) -> subprocess.CompletedProcess[str]:
        return _cli(world, "occurrences", "show", world.flooded, *args)

    shown = show()
    assert shown.returncode == 0, shown.stderr
    assert 90 <= shown.stdout.count("flood-") <= 100
    assert "--from 100" in shown.stdout
    as_json = json.loads(show("--json", "--from", "50", "--limit", "7").stdout)
    assert len(as_json["deliveries"]) == 7
    assert as_json["deliveries_page"] == {"from": 50, "limit": 7, "next": 57}
    refused = show("--limit", "0")
    assert refused.returncode == 2 and "--limit" in refused.stderr


def test_a_timeline_lists_one_page_of_a_run_delivered_many_times(world: World) -> None:
    # Before, it printed all 200,001 deliveries; with 1,000,000 it did not finish within
    # SLUICEGATE_READ_TIMEOUT (exit code 1).
    shown = _cli(world, "runs", "timeline", world.flooded_run)
    assert shown.returncode == 0, shown.stderr
    assert 900 <= shown.stdout.count("AdmitDelivery") <= 1000
    assert "--from 1000 for more" in shown.stdout
    lines = _cli(world, "runs", "timeline", world.flooded_run, "--json", "--limit", "5")
    assert lines.returncode == 0, lines.stderr
    assert len(lines.stdout.splitlines()) == 5
    assert "--from 5 for more" in lines.stderr
    with connect(world.settings.pg_dsn) as conn:
        timeline = queries.get_timeline(
            conn, schema_name(world.settings.topic_prefix), world.flooded_run, limit=1
        )
        assert timeline is not None and timeline["total"] > COPIES
        past = queries.get_timeline(
            conn,
            schema_name(world.settings.topic_prefix),
            world.flooded_run,
            start=timeline["total"] + 5,
        )
    assert past is not None and past["records"] == [] and past["total"] == timeline["total"]
    last = _cli(
        world, "runs", "timeline", world.flooded_run, "--json", "--from", str(timeline["total"] - 3)
    )
    assert len(last.stdout.splitlines()) == 3
    assert f"records {timeline['total'] - 2:,}-{timeline['total']:,} of" in last.stderr


def _walk_timeline(settings: Settings, run_id: str, limit: int) -> list[Any]:
    records: list[Any] = []
    start: int | None = 0
    total = -1
    with connect(settings.pg_dsn) as conn:
        while start is not None:
            timeline = queries.get_timeline(
                conn, schema_name(settings.topic_prefix), run_id, start=start, limit=limit
            )
            assert timeline is not None and len(timeline["records"]) <= limit
            assert timeline["page"]["from"] == start
            records += timeline["records"]
            start, total = timeline["page"]["next"], timeline["total"]
    assert len(records) == total
    return records


def test_timeline_pages_list_every_record_once_in_order(world: World) -> None:
    with connect(world.settings.pg_dsn) as conn:
        found = queries.get_occurrence(conn, schema_name(world.settings.topic_prefix), world.walked)
    assert found is not None
    run_id = found["runs"][0]["run_id"]
    by_thousand = _walk_timeline(world.settings, run_id, 1000)
    assert _walk_timeline(world.settings, run_id, 97) == by_thousand
    assert sum(1 for r in by_thousand if r["type"] == "AdmitDelivery") > WALKED
    keys = [(r["topic"], r["partition"], r["offset"]) for r in by_thousand]
    assert len(set(keys)) == len(keys)
