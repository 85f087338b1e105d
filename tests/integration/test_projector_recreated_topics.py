"""A read model whose topics were deleted and created again under the same names (or whose
Kafka cluster was reset while PostgreSQL kept the read model): its stored offsets belong to
topics that no longer exist, and the projector must not resume from them.

Stored offsets beyond a partition's end were always refused. Once the new topics have grown
past them, though, offsets alone cannot tell, and resuming would skip the new topics' first
records for good; each topic's id (Kafka gives every topic a new one when it is created)
tells.
"""

from __future__ import annotations

import io
import os
import random
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

from projections import queries
from projections.errors import HistoryNotInTopics, TopicRecreated
from projections.projector import Projector
from projections.rebuild import rebuild
from sluicegate.commands.projections import MUST_REBUILD
from streams.kafka.clients import admin_client
from streams.kafka.topics import ensure_topics
from streams.settings import Settings
from tests.support.history import build_history, fresh_topics, produce_history
from tests.support.kafka import delete_issued_topics, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


@pytest.fixture
def settings() -> Iterator[Settings]:
    with fresh_topics(partitions=3) as s:
        yield s


def recreate_topics(settings: Settings) -> None:
    """Delete every topic of the test's prefix and create the catalogue again."""
    prefix = settings.topic_prefix
    delete_issued_topics(settings, [prefix])
    admin = admin_client(settings)
    wait_until(
        lambda: not any(t.startswith(prefix) for t in admin.list_topics(timeout=10).topics),
        timeout_s=60,
        what="the deleted topics to go",
    )
    ensure_topics(settings)


def check(settings: Settings, wait_s: int = 20, **env: str) -> subprocess.CompletedProcess[str]:
    """``sluicegate projections check`` under the test's prefix, ``env`` on top."""
    env = dict(
        os.environ,
        SLUICEGATE_TOPIC_PREFIX=settings.topic_prefix,
        SLUICEGATE_PARTITIONS=str(settings.partitions),
        **env,
    )
    command = [
        sys.executable,
        "-m",
        "sluicegate.cli",
        "projections",
        "check",
        "--wait",
        str(wait_s),
    ]
    return subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_topics_recreated_and_grown_past_the_stored_offsets_are_not_resumed(
    settings: Settings,
) -> None:
    rng = random.Random(41)
    produce_history(settings, build_history(rng, 6, tag="gone"), rng=rng, abort_every=0)
    with Projector(settings) as projector:
        stored = projector.run_until(timeout_s=60)

    recreate_topics(settings)
    produced = 0
    with Projector(settings) as projector:
        # Until every partition has grown past its stored offset: offsets cannot tell then.
        while not all(projector.end_offsets().get(tp, 0) >= o for tp, o in stored.items()):
            after = build_history(rng, 20, tag=f"new{produced}")
            produce_history(settings, after, rng=rng, abort_every=0)
            produced += len(after)
        with pytest.raises(TopicRecreated, match="projections rebuild") as refused:
            projector.run_until(timeout_s=60)
    assert "deleted and created again" in str(refused.value)
    checked = check(settings)
    assert checked.returncode == MUST_REBUILD, checked.stderr
    assert "projections rebuild" in checked.stderr

    # The remedy the message names: a rebuild told to drop what was projected from the old
    # topics projects them as they are now, after which the projector resumes as usual.
    # Untold, it refuses: the read model is all that is left of the old topics' records.
    with queries.reader(settings) as (conn, schema):
        old = conn.execute(f'SELECT count(*) FROM "{schema}".event_log').fetchone()
    assert old is not None and old[0] > 0
    with pytest.raises(HistoryNotInTopics, match="its topic deleted since") as kept:
        rebuild(settings, stream=io.StringIO(), show_progress=False)
    assert f"holds {old[0]} records the topics no longer hold" in str(kept.value)
    assert "--drop-history" in str(refused.value)
    told = io.StringIO()
    rebuild(settings, stream=told, show_progress=False, drop_history=True)
    assert f"dropped {old[0]} records the topics no longer hold" in told.getvalue()
    assert check(settings).returncode == 0
    with Projector(settings) as projector:
        projector.run_until(timeout_s=60)
    with queries.reader(settings) as (conn, schema):
        logged = conn.execute(f'SELECT count(*) FROM "{schema}".event_log').fetchone()
    assert logged is not None and logged[0] == produced


def test_a_running_projector_stops_at_its_next_look_at_topics_recreated_under_it(
    settings: Settings,
) -> None:
    """Deleted and created again within one of its looks for new partitions (every 10 s),
    the topics look unchanged to a running projector, and its consumer reads the new
    topics from the old positions: it skipped their first records without a word. Its next
    look compares the topics' ids and stops it; the rebuild its message asks for projects
    the topics as they are."""
    rng = random.Random(43)
    produce_history(settings, build_history(rng, 6, tag="gone"), rng=rng, abort_every=0)
    failed: list[BaseException] = []
    with Projector(settings) as projector:
        projector.run_until(timeout_s=60)

        def follow() -> None:
            try:
                projector.run()
            except BaseException as e:  # the test reads it
                failed.append(e)

        following = threading.Thread(target=follow, daemon=True)
        following.start()
        recreate_topics(settings)
        produce_history(settings, build_history(rng, 20, tag="new"), rng=rng, abort_every=0)
        following.join(40)  # at most one look (10 s) after the topics came back, and a batch
        projector.stop.set()
        following.join(30)
    assert failed and isinstance(failed[0], TopicRecreated), failed
    assert "projections rebuild" in str(failed[0])


def test_check_says_so_when_postgresql_does_not_answer(settings: Settings) -> None:
    closed = "postgresql://sluicegate:sluicegate@127.0.0.1:1/sluicegate"  # nothing listens
    checked = check(settings, wait_s=1, SLUICEGATE_PG_DSN=closed)
    assert checked.returncode == 1, checked.stderr
    last = checked.stderr.strip().splitlines()[-1]
    assert last == (
        "sluicegate projections check: PostgreSQL at 127.0.0.1:1/sluicegate did not answer "
        "within 1 s"
    )
