"""kill -9 of a rebuild whose load runs in worker processes: no worker outlives it.

A rebuild process (``rebuild(workers=2)``) is killed with SIGKILL while its workers are
loading (their first batches stored, more to come). The workers must be gone at once, not go
on writing into the fresh schema, and the next rebuild must leave the tables a sequential one
leaves.
"""

from __future__ import annotations

import io
import os
import pickle
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from projections.db import REBUILD_SUFFIX, connect, schema_exists, schema_name
from projections.rebuild import rebuild, stored_offsets
from streams.kafka.topics import ensure_topics
from streams.settings import Settings
from tests.support.component_process import ROOT
from tests.support.drills import children_running
from tests.support.history import build_history, cleanup, produce_history
from tests.support.kafka import unique_settings

pytestmark = [pytest.mark.drill, pytest.mark.timeout(300)]

WORKER = "projections.parallel_load"
REBUILD = "\n".join(
    [
        "import pickle, sys",
        "from projections.rebuild import rebuild",
        "rebuild(pickle.load(sys.stdin.buffer), show_progress=False, workers=2)",
    ]
)


@pytest.fixture
def settings() -> Iterator[Settings]:
    s = unique_settings(partitions=6)
    ensure_topics(s)
    rng = random.Random(51)
    produce_history(s, build_history(rng, 2000), rng=rng, transaction_size=500, abort_every=0)
    yield s
    cleanup(s)


def _stored(settings: Settings, schema: str) -> int:
    with connect(settings.pg_dsn, autocommit=True) as conn:
        if not schema_exists(conn, schema):
            return 0
        try:
            return sum(stored_offsets(conn, schema).values())
        except Exception:  # migrating: the offsets table is not there yet
            return 0


def test_kill_9_of_a_rebuild_mid_load_leaves_no_worker_writing(settings: Settings) -> None:
    fresh = schema_name(settings.topic_prefix) + REBUILD_SUFFIX
    parent = subprocess.Popen(
        [sys.executable, "-c", REBUILD], stdin=subprocess.PIPE, cwd=ROOT, env=dict(os.environ)
    )
    assert parent.stdin is not None
    parent.stdin.write(pickle.dumps(settings))
    parent.stdin.close()
    try:
        deadline = time.monotonic() + 60
        while _stored(settings, fresh) == 0:
            assert parent.poll() is None, "the rebuild ended before its workers stored a batch"
            assert time.monotonic() < deadline, "no worker stored a batch within 60 s"
            time.sleep(0.02)
        workers = children_running(parent.pid, WORKER)
        assert len(workers) == 2
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        at_kill = _stored(settings, fresh)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
    # Gone at once (the kernel kills them with their parent), and their sessions with them:
    # nothing is left that could write into the fresh schema.
    deadline = time.monotonic() + 5
    while any(_alive(pid) for pid in workers) or _sessions(settings, fresh):
        assert time.monotonic() < deadline, f"workers {workers} outlived their rebuild"
        time.sleep(0.05)
    left = _stored(settings, fresh)
    assert left >= at_kill
    rebuilt = rebuild(settings, stream=io.StringIO(), show_progress=False, workers=2)
    assert rebuilt.swapped
    total = sum(rebuilt.offsets.values())
    assert at_kill < total, "the kill came after the load"
    assert left < total, "the workers went on loading after their rebuild was killed"
    verified = rebuild(settings, verify=True, stream=io.StringIO(), show_progress=False, workers=1)
    assert verified.differences == []
    assert verified.messages == rebuilt.messages


def _sessions(settings: Settings, schema: str) -> int:
    with connect(settings.pg_dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
            (f"sluicegate-projector:{schema}"[:63],),
        ).fetchone()
    return int(row[0]) if row else 0


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False
