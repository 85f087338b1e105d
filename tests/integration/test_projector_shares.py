"""Live projectors that share the partitions (``sluicegate projector --share K/N``), on the
real broker and PostgreSQL: together they leave the tables one projector leaves, through
aborted transactions and a rebuild swapped in under them."""

from __future__ import annotations

import io
import os
import random
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from projections.db import schema_name
from projections.projector import Projector
from projections.rebuild import rebuild
from projections.share import Share
from streams.kafka.topics import ensure_topics
from streams.settings import Settings
from tests.integration.test_projector_rebuild import wait_caught_up
from tests.support.history import build_history, cleanup, produce_history
from tests.support.kafka import unique_settings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

SLUICEGATE = str(Path(sys.executable).parent / "sluicegate")


@pytest.fixture
def settings() -> Iterator[Settings]:
    s = unique_settings(partitions=6)
    ensure_topics(s)
    yield s
    cleanup(s)


def test_three_shares_follow_the_topics_through_a_rebuild_and_equal_one_projector(
    settings: Settings,
) -> None:
    live = schema_name(settings.topic_prefix)
    rng = random.Random(61)
    projectors = [Projector(settings, batch_size=50, share=Share(k, 3)) for k in range(3)]
    threads = [threading.Thread(target=p.run, daemon=True) for p in projectors]
    whole = Projector(settings)  # for the ends of every partition; it never projects

    def caught_up() -> None:
        wait_caught_up(settings, whole, live)

    try:
        for thread in threads:
            thread.start()
        produce_history(settings, build_history(rng, 30, tag="before"), rng=rng)
        caught_up()

        def shares_move_on() -> None:
            # Between the rebuild's last batch and its swap the shares project more, so the
            # swap moves each share's stored offsets back under it: each re-seeks to its own.
            produce_history(settings, build_history(rng, 30, tag="during"), rng=rng)
            caught_up()

        result = rebuild(settings, stream=io.StringIO(), workers=1, _before_swap=shares_move_on)
        assert result.swapped
        produce_history(settings, build_history(rng, 30, tag="after"), rng=rng)
        caught_up()
    finally:
        for projector in projectors:
            projector.stop.set()
        for thread in threads:
            thread.join(15)
        for projector in [*projectors, whole]:
            projector.close()
    assert all(p.stats.reseeks >= 1 for p in projectors)
    assert all(p.stats.messages > 0 for p in projectors)
    verified = rebuild(settings, verify=True, stream=io.StringIO(), workers=1)
    assert [d.describe() for d in verified.differences] == []


@pytest.mark.parametrize("value", ["2/2", "-1/2", "1/0", "1", "a/b", "1/2/3"])
def test_a_share_that_does_not_exist_is_refused_by_the_cli(settings: Settings, value: str) -> None:
    env = dict(os.environ, SLUICEGATE_TOPIC_PREFIX=settings.topic_prefix)
    done = subprocess.run(
        [SLUICEGATE, "projector", f"--share={value}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "expected K/N with 0 <= K < N" in done.stderr
