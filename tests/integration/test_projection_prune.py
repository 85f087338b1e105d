"""``projections prune`` deletes exactly the occurrences the engine forgot and the topics lost.

On the real broker and PostgreSQL (``tests/support/prune.py``): what must go is worked out
from the history and the rows, independently of the prune's SQL; every other row must stay
as it was.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from projections.db import connect
from projections.errors import ProjectionUnavailable
from projections.projector import Projector
from projections.prune import PruneReport, prune
from projections.prune_rows import BY_KEY, BY_RUN, KEPT
from projections.rebuild import rebuild
from schemas.events import AdmissionRecordEvicted, RunAdmitted
from schemas.topics import DELIVERIES
from streams.settings import Settings
from tests.integration.test_read_cli_http import with_client
from tests.support.history import DAY_MS, build_history, produce_history
from tests.support.kafka import unique_settings, wait_until
from tests.support.ports import free_port
from tests.support.prune import (
    Setup,
    expire,
    forgotten,
    names,
    projected_history,
    record_partitions,
    runs_of_keys,
    snapshot,
    without,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

SLUICEGATE = str(Path(sys.executable).parent / "sluicegate")


@pytest.fixture
def setup() -> Iterator[Setup]:
    with projected_history() as projected:
        yield projected


def test_nothing_goes_while_the_topics_still_hold_the_records(setup: Setup) -> None:
    before = snapshot(setup.settings, setup.schema)
    report = prune(setup.settings)
    assert (report.examined, report.pruned, report.runs, sum(report.rows.values())) == (
        len(setup.evicted | setup.never_admitted),
        0,
        0,
        0,
    )
    assert report.in_topics == len(forgotten(setup))
    assert report.held == len(setup.evicted - forgotten(setup)) > 0
    assert snapshot(setup.settings, setup.schema) == before


def test_what_the_engine_forgot_and_the_topics_lost_goes_and_nothing_else(setup: Setup) -> None:
    s = setup
    gone = forgotten(s)
    assert s.journal_evicted <= runs_of_keys(s, gone), "the runs of evicted journals go"
    assert len(s.evicted - gone) >= 2
    expire(s.settings)
    before = snapshot(s.settings, s.schema)

    dry = prune(s.settings, dry_run=True, batch=7)
    assert snapshot(s.settings, s.schema) == before, "a dry run deletes nothing"

    report = prune(s.settings, batch=7)
    after = snapshot(s.settings, s.schema)
    runs = runs_of_keys(s, gone)
    examined = len(s.evicted | s.never_admitted)
    assert (report.examined, report.pruned, report.runs) == (examined, len(gone), len(runs))
    assert (report.held, report.in_topics) == (len(s.evicted - gone), 0)
    assert (dry.pruned, dry.runs, dry.rows) == (report.pruned, report.runs, report.rows)
    assert after == without(before, gone, runs), "exactly the rows naming them went"
    assert after["counters"] == before["counters"]
    kept = s.evicted - gone
    assert all(names(row, kept, set()) for row in after["evictions"])
    assert len(after["evictions"]) == len(kept)
    deleted = {t: before[t].total() - after[t].total() for t in before}
    assert {t: n for t, n in deleted.items() if n} == {t: n for t, n in report.rows.items() if n}
    assert report.rows["journal_attempts"] > 0 and report.rows["branch_launches"] > 0

    again = prune(s.settings)
    assert (again.examined, again.pruned, sum(again.rows.values())) == (len(kept), 0, 0)
    assert snapshot(s.settings, s.schema) == after


def test_an_occurrence_with_a_record_left_in_a_partition_stays(setup: Setup) -> None:
    s = setup
    where = record_partitions(s.settings, s.schema)
    gone = forgotten(s)
    # Keep one partition of `runs`: every occurrence with a record there must stay.
    keep = {("runs", 0)}
    staying = {k for k in gone if where.get(k, set()) & keep}
    assert staying and gone - staying
    expire(s.settings, keep)
    before = snapshot(s.settings, s.schema)
    verified = _verify(s.settings)
    report = prune(s.settings)
    pruned = gone - staying
    assert (report.pruned, report.in_topics) == (len(pruned), len(staying))
    assert snapshot(s.settings, s.schema) == without(before, pruned, runs_of_keys(s, pruned))
    # A rebuild could not bring back what went: --verify only lost the pruned rows'
    # differences (each "only in live"), and found none it had not found before.
    after = _verify(s.settings)
    assert after < verified
    assert all(": only in live: " in d for d in verified - after)


def _verify(settings: Settings) -> set[str]:
    result = rebuild(settings, verify=True, show_progress=False, timeout_s=60)
    return {d.describe() for d in result.differences}


def test_an_audit_horizon_keeps_the_occurrences_with_a_younger_record(setup: Setup) -> None:
    s = setup
    expire(s.settings)
    gone = forgotten(s)
    times = sorted(s.last_at[k] for k in gone)
    cutoff = times[len(times) // 2]
    old = {k for k in gone if s.last_at[k] < cutoff}
    assert old and gone - old
    keep = 400 * DAY_MS
    before = snapshot(s.settings, s.schema)
    report = prune(s.settings, keep_ms=keep, now_ms=lambda: cutoff + keep)
    assert (report.pruned, report.young) == (len(old), len(gone - old))
    assert report.describe().endswith(f"; kept {len(gone - old):,} younger than 400d")
    assert snapshot(s.settings, s.schema) == without(before, old, runs_of_keys(s, old))
    again = prune(s.settings, keep_ms=keep, now_ms=lambda: times[-1] + 1 + keep)
    assert again.pruned == len(gone - old), "once older than the horizon, they go"


def test_the_projector_goes_on_between_batches(setup: Setup) -> None:
    """Every batch holds the writers' lock; between them the live projector projects new
    records, and a prune with one key per batch neither blocks it nor loses its rows."""
    s = setup
    gone = forgotten(s)
    expire(s.settings)
    rng = random.Random(5)
    more = build_history(rng, 12, tag="later")
    before = snapshot(s.settings, s.schema)["event_log"].total()
    batches: list[int] = []
    with Projector(s.settings) as projector:

        def on_batch(report: PruneReport) -> None:
            batches.append(report.pruned)
            if len(batches) <= 3:
                produce_history(s.settings, more[len(batches) - 1 :: 3], rng=rng)
                projector.run_until(timeout_s=60)

        report = prune(s.settings, batch=1, on_batch=on_batch)
    # The later occurrences' records are in the topics: those evicted or never admitted stay.
    later_evicted = sum(isinstance(e.record, AdmissionRecordEvicted) for e in more)
    later_admitted = {e.record.admission_key for e in more if isinstance(e.record, RunAdmitted)}
    later_never = {e.key for e in more if e.topic == DELIVERIES.name} - later_admitted
    later = later_evicted + len(later_never)
    examined = len(s.evicted | s.never_admitted) + later
    assert (report.pruned, report.examined, report.in_topics) == (len(gone), examined, later)
    assert len(batches) == report.examined + 2, "one key a batch, then none, twice"
    logged = snapshot(s.settings, s.schema)["event_log"].total()
    assert logged == before - report.rows["event_log"] + len(more), "no later record lost"


def test_two_prunes_at_once_delete_each_occurrence_once(setup: Setup) -> None:
    """A cron job's prune beside the projector's: their batches take turns on the lock,
    each occurrence goes in one of them, and the tables end as one prune leaves them."""
    s = setup
    gone = forgotten(s)
    expire(s.settings)
    before = snapshot(s.settings, s.schema)
    reports: list[PruneReport] = []
    failures: list[BaseException] = []

    def one() -> None:
        try:
            reports.append(prune(s.settings, batch=1))
        except BaseException as e:
            failures.append(e)

    threads = [threading.Thread(target=one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert failures == [] and len(reports) == 2
    assert sum(r.pruned for r in reports) == len(gone)
    assert sum(r.rows["evictions"] for r in reports) == len(gone & s.evicted)
    assert snapshot(s.settings, s.schema) == without(before, gone, runs_of_keys(s, gone))


def test_every_table_it_deletes_from_has_an_index_on_the_column(setup: Setup) -> None:
    with connect(setup.settings.pg_dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT t.relname, a.attname FROM pg_index x "
            "JOIN pg_class t ON t.oid = x.indrelid "
            "JOIN pg_namespace n ON n.oid = t.relnamespace "
            "JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = x.indkey[0] "
            "WHERE n.nspname = %s",
            (setup.schema,),
        ).fetchall()
    leading = {(str(t), str(c)) for t, c in rows}
    wanted = {(t, "admission_key") for t in BY_KEY} | {(t, "run_id") for t in BY_RUN}
    assert wanted - leading == set()


def _prune_command(s: Setup, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SLUICEGATE, "projections", "prune", *args],
        env={**os.environ, "SLUICEGATE_TOPIC_PREFIX": s.settings.topic_prefix},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_command_says_what_it_would_prune_and_what_it_pruned(setup: Setup) -> None:
    s = setup
    expire(s.settings)
    dry = _prune_command(s, "--dry-run", "--batch", "10")
    assert dry.returncode == 0, dry.stderr
    n = len(forgotten(s))
    assert f"would prune {n:,} occurrences" in dry.stderr
    assert "(dry run: nothing deleted)" in dry.stderr
    assert "  event_log " in dry.stdout
    done = _prune_command(s)
    assert done.returncode == 0, done.stderr
    assert f"pruned {n:,} occurrences" in done.stderr
    assert done.stdout == dry.stdout
    bad = _prune_command(s, "--batch", "0")
    assert bad.returncode == 2 and "not a whole number from 1 to 100000" in bad.stderr


def test_a_projector_told_to_prune_every_second_prunes_beside_its_batches(setup: Setup) -> None:
    s = setup
    expire(s.settings)
    gone = forgotten(s)
    before = snapshot(s.settings, s.schema)
    port = free_port()
    env = {**os.environ, "SLUICEGATE_TOPIC_PREFIX": s.settings.topic_prefix}
    child = subprocess.Popen(
        [SLUICEGATE, "projector", "--prune-every", "1s", "--health", f"127.0.0.1:{port}"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    details: dict[str, Any] = {}

    def pruned() -> bool:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        try:
            conn.request("GET", "/healthz")
            details.update(json.loads(conn.getresponse().read()))
        except OSError:
            return False  # not listening yet
        finally:
            conn.close()
        prune = details.get("prune") or {}
        return bool(prune.get("runs"))

    try:
        wait_until(pruned, timeout_s=60, what="the projector's first prune")
    finally:
        child.send_signal(signal.SIGTERM)
        _, stderr = child.communicate(timeout=60)
    assert child.returncode == 0, stderr[-2000:]
    prune = details["prune"]
    assert (prune["every_seconds"], prune["last_error"]) == (1.0, None)
    assert prune["last_pruned"] == len(gone)
    assert "pruning the read model every 1 s, the first in 1 s" in stderr
    assert f"projections prune: pruned {len(gone):,} occurrences" in stderr
    assert snapshot(s.settings, s.schema) == without(before, gone, runs_of_keys(s, gone))


def test_a_deployment_without_a_read_model_is_told_so() -> None:
    settings = unique_settings(partitions=1)
    with pytest.raises(ProjectionUnavailable, match="no read model in schema"):
        prune(settings)


def test_metrics_show_each_table_s_disk(setup: Setup) -> None:
    """What the read model takes, table by table, is on /metrics: its growth, and what a
    prune frees, can be watched."""
    found: dict[str, int] = {}

    async def read(client: TestClient[Any, Any]) -> None:
        text = await (await client.get("/metrics")).text()
        for line in text.splitlines():
            if line.startswith("sluicegate_projection_table_bytes{"):
                name = line.split('"')[1]
                found[name] = int(line.rsplit(" ", 1)[1])

    with_client(setup.settings, read)
    assert set(BY_KEY) | set(BY_RUN) | set(KEPT) <= set(found)
    assert found["event_log"] > found["workflows"] > 0
