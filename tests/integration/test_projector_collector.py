"""The projector runs with Python's automatic cyclic collection paused (streams/collector.py)
and leaves it as it found it, whether it catches up, follows until stopped, or fails."""

from __future__ import annotations

import gc
import random
import threading
from collections.abc import Iterator

import pytest

from projections.errors import ProjectionError
from projections.projector import Projector
from streams.settings import Settings
from tests.support.history import build_history, fresh_topics, produce_history

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture
def settings() -> Iterator[Settings]:
    with fresh_topics(partitions=3) as s:
        rng = random.Random(5)
        produce_history(s, build_history(rng, occurrences=6), rng=rng)
        yield s


def test_catching_up_pauses_collection_and_restores_it(settings: Settings) -> None:
    seen: list[bool] = []
    assert gc.isenabled()
    with Projector(settings, on_progress=lambda _: seen.append(gc.isenabled())) as projector:
        projector.run_until(timeout_s=60)
        assert projector.stats.messages > 0
    assert seen and not any(seen)
    assert gc.isenabled()


def test_following_pauses_collection_until_stopped(settings: Settings) -> None:
    seen: list[bool] = []
    projected = threading.Event()

    def progress(_: int) -> None:
        seen.append(gc.isenabled())
        projected.set()

    with Projector(settings, on_progress=progress, poll_timeout_s=0.05) as projector:
        follower = threading.Thread(target=projector.run)
        follower.start()
        assert projected.wait(60)
        projector.stop.set()
        follower.join(60)
    assert seen and not any(seen)
    assert gc.isenabled()


def test_a_projector_that_fails_restores_collection(settings: Settings) -> None:
    stop = threading.Event()
    stop.set()
    with Projector(settings, stop=stop) as projector, pytest.raises(ProjectionError):
        projector.run_until(timeout_s=60)
    assert gc.isenabled()
