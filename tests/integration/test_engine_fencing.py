"""A zombie cannot commit: every transaction carries the consumer group metadata.

Instance A holds every partition and has timers due. It stalls (a GC pause, a stopped
process) right after a poll, long enough to exceed ``max.poll.interval.ms``: it leaves the
group and instance B takes every partition over. Then A wakes up and, with no input record,
fires its timers. Nothing of that timer-only transaction may become visible.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from streams.engine.processor import Processor
from streams.settings import Settings
from tests.support.engine_toy import (
    Running,
    ToyApp,
    ToyProcessor,
    out_events,
    produce_records,
    record,
)
from tests.support.kafka import create_topics, unique_settings, wait_until

pytestmark = pytest.mark.integration

BASE_MS = 1_000_000


@dataclasses.dataclass(frozen=True)
class ImpatientSettings(Settings):
    """Group members give up their membership after 6 s without a poll (the broker default
    for a stalled member is the session timeout; here the client leaves on its own, sooner)."""

    def kafka_config(self, **overrides: object) -> Any:
        conf = super().kafka_config(**overrides)
        if "max.poll.interval.ms" in conf:
            conf["max.poll.interval.ms"] = 6000
        return conf


class StallingClock:
    """The zombie's clock. ``stall()``: the next read blocks until ``wake(now)``. After the
    zombie's first transaction attempt past ``wake``, reads block again until ``release()``,
    so that the test sees exactly what that one attempt left behind."""

    def __init__(self) -> None:
        self.now = BASE_MS
        self.processor: ToyProcessor | None = None
        self.stalled = threading.Event()
        self._resume = threading.Event()
        self._resume.set()
        self.attempts_at_wake: int | None = None

    def attempts(self) -> int:
        assert self.processor is not None
        return self.processor.stats.batches + self.processor.stats.aborts

    def __call__(self) -> int:
        if self.attempts_at_wake is not None and self.attempts() > self.attempts_at_wake:
            self._resume.clear()
        if not self._resume.is_set():
            self.stalled.set()
            self._resume.wait()
        return self.now

    def stall(self) -> None:
        self._resume.clear()

    def wake(self, now: int) -> None:
        self.now = now
        self.attempts_at_wake = self.attempts()
        self.stalled.clear()
        self._resume.set()

    def release(self) -> None:
        self.attempts_at_wake = None
        self._resume.set()


@pytest.fixture()
def toy() -> Iterator[tuple[Settings, ToyApp]]:
    settings = unique_settings(partitions=3)
    create_topics(
        settings,
        [
            (settings.topic_named("in"), 3, False),
            (settings.topic_named("changelog"), 3, True),
            (settings.topic_named("out"), 3, False),
            (settings.topic_named("dead-letters"), 1, False),
        ],
    )
    yield settings, ToyApp(settings)


def test_a_zombie_cannot_commit_a_timer_only_transaction(toy: tuple[Settings, ToyApp]) -> None:
    settings, app = toy
    impatient = ImpatientSettings(
        **{f.name: getattr(settings, f.name) for f in dataclasses.fields(settings)}
    )
    keys = [f"k{n}" for n in range(12)]
    produce_records(settings, [record(k, f"id-{k}") for k in keys])

    clock = StallingClock()
    zombie: ToyProcessor = Processor(impatient, app, instance_id="a", clock=clock)
    clock.processor = zombie
    a = Running(zombie)
    wait_until(lambda: zombie.stats.records >= len(keys), timeout_s=60)
    assert zombie.stats.assigned == [0, 1, 2]

    clock.stall()  # A stalls right after its next poll ...
    assert clock.stalled.wait(30)
    b_processor: ToyProcessor = Processor(settings, app, instance_id="b", clock=lambda: BASE_MS)
    b = Running(b_processor)
    # ... past max.poll.interval.ms: it leaves the group and B takes every partition.
    wait_until(lambda: b_processor.stats.assigned == [0, 1, 2], timeout_s=90)

    clock.wake(BASE_MS + 60)  # every timer of A's (stale) state is due now
    wait_until(lambda: clock.attempts() > (clock.attempts_at_wake or 0), timeout_s=60)
    ticks = [e for e in out_events(settings) if e["kind"] == "ticked"]
    stats = zombie.stats
    print(
        f"\nzombie: batches={stats.batches} aborts={stats.aborts} "
        f"timers_fired={stats.timers_fired}; ticks visible to read_committed: {len(ticks)}"
    )
    b.stop()
    zombie.stop()
    clock.release()
    a.thread.join(60)
    assert ticks == []
    assert b.error is None
