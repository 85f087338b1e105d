"""The engine commands' run loop: SIGUSR1 logs the counters so far without stopping."""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from sluicegate.commands import engine
from streams.engine.batch import ProcessorStats
from streams.engine.effects import EffectRunner
from streams.engine.status import InstanceStatus

HANDLED = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)


@pytest.fixture(autouse=True)
def _restore_handlers() -> Iterator[None]:
    saved = {signum: signal.getsignal(signum) for signum in HANDLED}
    # Were SIGUSR1 left unhandled, its default action would end the test run itself.
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    try:
        yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)


class Counting:
    """Commits two 'transactions', asking for the counters after the first."""

    def __init__(self) -> None:
        self.batches = 0
        self.stopped = False
        self.status = InstanceStatus(stalled_after_s=60.0)
        self.stats = ProcessorStats()
        self.instance_id = "counting-1"
        self.app = SimpleNamespace(name="counting")
        self.effects: EffectRunner | None = None

    def run(self) -> None:
        self.batches += 1
        os.kill(os.getpid(), signal.SIGUSR1)  # the handler runs before the next line
        self.batches += 1

    def stop(self) -> None:
        self.stopped = True


def test_sigusr1_logs_the_counters_so_far_and_does_not_stop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    counting = Counting()
    log = logging.getLogger("test.engine")
    with caplog.at_level(logging.INFO, logger="test.engine"):
        assert (
            engine.run_until_signalled(counting, log, lambda s: f"batches={counting.batches}") == 0
        )
    assert [r.getMessage() for r in caplog.records] == ["counters: batches=1", "batches=2"]
    assert not counting.stopped


def test_sigterm_still_stops() -> None:
    class StopsOnSigterm(Counting):
        def run(self) -> None:
            os.kill(os.getpid(), signal.SIGTERM)

    runs = StopsOnSigterm()
    engine.run_until_signalled(runs, logging.getLogger("test.engine"), lambda _s: "done")
    assert runs.stopped
