"""Every read of the read model answers within ``SLUICEGATE_READ_TIMEOUT``, whatever holds
its tables.

A session holding a lock on a projection table (an analyst's ``LOCK TABLE``, a migration, a
rebuild's swap waiting behind an idle transaction, which queues every later reader behind
it) made the HTTP read API's pooled connections, and ``sluicegate runs show``, wait for it
for ever: a dashboard's requests hung and the pool's four connections stayed taken. A read
now gives up after the read timeout with an answer (503 ``projection_unavailable``, exit
code 1) that says what to look for, and the next read after the lock goes is served.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from psycopg import sql

from projections.db import connect, schema_name
from projections.http import add_read_routes
from projections.migrate import migrate
from streams.kafka.topics import ensure_topics
from streams.settings import Settings
from tests.support.component_process import ComponentProcess
from tests.support.history import cleanup
from tests.support.kafka import unique_settings, wait_until
from tests.support.ports import free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

SLUICEGATE = str(Path(sys.executable).parent / "sluicegate")


@pytest.fixture
def settings() -> Iterator[Settings]:
    s = unique_settings(SLUICEGATE_READ_TIMEOUT="1s")
    schema = schema_name(s.topic_prefix)
    with connect(s.pg_dsn, autocommit=True) as conn:
        migrate(conn, schema, s.topic_prefix)
    yield s
    with connect(s.pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@contextmanager
def locked(settings: Settings, table: str) -> Iterator[None]:
    """``table`` held in ACCESS EXCLUSIVE mode by another session until the block ends."""
    conn = connect(settings.pg_dsn)
    try:
        conn.execute(
            sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(
                sql.Identifier(schema_name(settings.topic_prefix), table)
            )
        )
        yield
    finally:
        conn.rollback()
        conn.close()


def test_an_http_read_behind_a_lock_answers_503_and_the_next_one_is_served(
    settings: Settings,
) -> None:
    async def main() -> None:
        app = web.Application()
        add_read_routes(app, settings)
        async with TestClient(TestServer(app)) as client:
            with locked(settings, "runs"):
                # More reads than the pool has connections: none may keep one for ever.
                answers = await asyncio.wait_for(
                    asyncio.gather(*(client.get(f"/v1/runs/r-{n}") for n in range(6))), 30
                )
                bodies: list[Any] = [await a.json() for a in answers]
            assert [a.status for a in answers] == [503] * 6
            assert {b["error"]["code"] for b in bodies} == {"projection_unavailable"}
            message = bodies[0]["error"]["message"]
            assert "SLUICEGATE_READ_TIMEOUT (1s)" in message and "lock" in message, message
            after = await asyncio.wait_for(client.get("/v1/runs/r-1"), 10)
            assert after.status == 404  # served again: the run simply is not there
            assert (await after.json())["error"]["code"] == "run_not_found"

    asyncio.run(main())


def test_the_cli_read_behind_a_lock_stops_with_a_message(settings: Settings) -> None:
    env = dict(
        os.environ, SLUICEGATE_TOPIC_PREFIX=settings.topic_prefix, SLUICEGATE_READ_TIMEOUT="1s"
    )
    with locked(settings, "runs"):
        shown = subprocess.run(
            [SLUICEGATE, "runs", "show", "r-1"],
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    print(f"\nexit {shown.returncode}: {shown.stderr.strip()}")
    assert shown.returncode == 1
    assert "SLUICEGATE_READ_TIMEOUT (1s)" in shown.stderr
    assert "Traceback" not in shown.stderr


def test_a_cli_read_whose_session_is_ended_stops_with_a_message(settings: Settings) -> None:
    """An operator ends the waiting session (``pg_terminate_backend``): one line, no
    traceback."""
    env = dict(
        os.environ, SLUICEGATE_TOPIC_PREFIX=settings.topic_prefix, SLUICEGATE_READ_TIMEOUT="60s"
    )
    waiting_on = f"%{schema_name(settings.topic_prefix)}%"
    with locked(settings, "runs"), connect(settings.pg_dsn, autocommit=True) as admin:
        shown = subprocess.Popen(
            [SLUICEGATE, "runs", "show", "r-1"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

        def ended() -> bool:
            row = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE wait_event_type = 'Lock' AND query LIKE %s",
                (waiting_on,),
            ).fetchone()
            return bool(row and row[0])

        wait_until(ended, timeout_s=30)
        _, err = shown.communicate(timeout=30)
    print(f"\nexit {shown.returncode}: {err.strip()}")
    assert shown.returncode == 1
    assert "lost PostgreSQL at" in err and "while reading" in err
    assert "Traceback" not in err


def test_reads_held_by_a_lock_leave_the_webhook_ready(settings: Settings, tmp_path: Path) -> None:
    """The read API and the webhook share ``sluicegate ingest``: reads that wait (here behind
    a lock, elsewhere behind slow queries) must not hold up the webhook's ``/readyz``. Before,
    both ran on the process's default thread pool (six threads on two cores): 40 held reads
    queued ``/readyz``'s Kafka check behind them past the 20 s this test waits."""
    ensure_topics(settings)
    hook, read = free_port(), free_port()
    ingest = ComponentProcess(
        settings,
        "ingest",
        log_path=tmp_path / "ingest.log",
        env={
            "SLUICEGATE_PG_DSN": settings.pg_dsn,
            "SLUICEGATE_HTTP": f"127.0.0.1:{hook}",
            "SLUICEGATE_READ_HTTP": f"127.0.0.1:{read}",
            "SLUICEGATE_READ_TIMEOUT": "60s",  # held for as long as the lock is
        },
    )

    async def scenario() -> None:
        timeout = aiohttp.ClientTimeout(total=90)
        async with aiohttp.ClientSession(timeout=timeout) as session:

            async def get(url: str) -> tuple[int, Any]:
                async with session.get(url) as response:
                    return response.status, await response.json()

            for _ in range(300):
                assert ingest.alive(), ingest.log_tail()
                with contextlib.suppress(aiohttp.ClientConnectionError):
                    if (await get(f"http://127.0.0.1:{hook}/readyz"))[0] == 200:
                        break
                await asyncio.sleep(0.2)
            with locked(settings, "runs"):
                reads = [
                    asyncio.create_task(get(f"http://127.0.0.1:{read}/v1/runs/r-{n}"))
                    for n in range(40)
                ]
                await asyncio.sleep(0.5)  # let them reach the server and wait
                status, ready = await asyncio.wait_for(get(f"http://127.0.0.1:{hook}/readyz"), 20)
                assert status == 200 and ready["ready"], ready
                assert not all(task.done() for task in reads)
            answers = await asyncio.gather(*reads)
        statuses = [status for status, _ in answers]
        assert set(statuses) <= {404, 503}, statuses
        assert 404 in statuses  # the reads holding a connection are served once it goes
        for status, body in answers:
            if status == 503:
                assert body["error"]["code"] == "projection_unavailable", body

    ingest.start()
    try:
        asyncio.run(scenario())
    finally:
        ingest.stop()
        cleanup(settings)
