"""Live projectors that share the partitions (``sluicegate projector --share K/N``), on the
real broker and PostgreSQL: together they leave the tables one projector leaves, through
aborted transactions and a rebuild swapped in under them."""

from __future__ import annotations

import io
import logging
import os
import random
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from projections import siblings
from projections.db import schema_name
from projections.projector import Projector
from projections.rebuild import rebuild
from projections.share import Share
from sluicegate.commands.projections import projector_probes
from streams.kafka.topics import ensure_topics
from streams.settings import Settings
from tests.integration.test_projector_rebuild import wait_caught_up
from tests.support.history import build_history, cleanup, produce_history
from tests.support.kafka import unique_settings, wait_until

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


def test_a_share_nobody_projects_is_named_until_its_projector_catches_up(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Only share 0/2 runs: its projector names share 1/2, whose partitions stay behind
    Kafka, in a warning and in its health body's list; once a 1/2 projector has caught up,
    the list is empty again. (Both windows are 0 here: every loop looks.)"""
    monkeypatch.setattr(siblings, "CHECK_EVERY_S", 0.0)
    monkeypatch.setattr(siblings, "STALLED_AFTER_S", 0.0)
    rng = random.Random(62)
    produce_history(settings, build_history(rng, 20, tag="half"), rng=rng)
    running = Projector(settings, batch_size=50, share=Share(0, 2))
    thread = threading.Thread(target=running.run, daemon=True)
    details = projector_probes(running).details
    assert running.siblings is not None
    try:
        with caplog.at_level(logging.WARNING, logger="sluicegate.projector"):
            thread.start()
            wait_until(lambda: running.siblings.labels() == ["1/2"], 60)
            assert details()["stalled_shares"] == ["1/2"]
            said = [r.getMessage() for r in caplog.records if "looks unprojected" in r.getMessage()]
            assert said and "`sluicegate projector --share 1/2` running?" in said[0]
            assert all("[0]" not in line and "[2]" not in line for line in said)  # share 0's
        with Projector(settings, batch_size=50, share=Share(1, 2)) as other:
            other.run_until(timeout_s=60)
        wait_until(lambda: running.siblings.labels() == [], 60)
    finally:
        running.stop.set()
        thread.join(15)
        running.close()


def test_a_projector_without_a_share_watches_nothing(settings: Settings) -> None:
    with Projector(settings) as whole, Projector(settings, share=Share(0, 1)) as alone:
        assert whole.siblings is None and alone.siblings is None
