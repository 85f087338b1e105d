"""How ``sluicegate serve`` hears its children's heartbeats and when it gives up on one."""

from __future__ import annotations

import select
import sys

import pytest

from sluicegate.errors import SluicegateError
from sluicegate.restarts import FIRST_BEAT_S, STEADY_S, back_off, overdue, parse_liveness
from sluicegate.supervisor import _Child, child_environment
from streams import heartbeat


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30.0), ("2m", 120.0), (" 5S ", 5.0), ("4500ms", 4.5), ("10000", 10.0)],
)
def test_liveness_windows(text: str, seconds: float) -> None:
    assert parse_liveness(text) == seconds


@pytest.mark.parametrize("text", ["off", "OFF", "0", "none"])
def test_liveness_switched_off(text: str) -> None:
    assert parse_liveness(text) is None


@pytest.mark.parametrize(
    "text", ["2s", "999ms", "soon", "-5s", "5 s", "1.5s", "\u00b2", "9" * 5000]
)
def test_unusable_liveness_windows_are_refused_with_the_forms(text: str) -> None:
    with pytest.raises(SluicegateError, match="liveness window"):
        parse_liveness(text)


def test_a_child_is_overdue_a_window_after_its_last_beat() -> None:
    assert not overdue(now=130.0, started_at=0.0, heard_at=100.0, liveness_s=30.0)
    assert overdue(now=130.1, started_at=0.0, heard_at=100.0, liveness_s=30.0)


def test_a_first_beat_gets_at_least_the_start_allowance() -> None:
    assert not overdue(now=FIRST_BEAT_S, started_at=0.0, heard_at=None, liveness_s=5.0)
    assert overdue(now=FIRST_BEAT_S + 0.1, started_at=0.0, heard_at=None, liveness_s=5.0)
    # A window longer than the allowance applies to the first beat as well.
    long = FIRST_BEAT_S * 2
    assert not overdue(now=long, started_at=0.0, heard_at=None, liveness_s=long)


def test_a_child_gets_its_own_descriptor_not_the_supervisors() -> None:
    environ = {heartbeat.ENV: "7", "PATH": "/bin"}
    assert child_environment(environ) == {"PATH": "/bin"}


BEATING_CHILD = """
from streams.heartbeat import Heartbeat
heart = Heartbeat.from_environment()
assert heart is not None
heart.beat()
import signal; signal.pause()  # until the test kills it
"""


def test_a_started_child_beats_on_its_own_pipe_and_is_heard() -> None:
    child = _Child("beater")
    child.start([sys.executable, "-c", BEATING_CHILD], now=0.0)
    try:
        assert child.beats is not None and child.heard_at is None
        assert select.select([child.beats], [], [], 30)[0], "no beat within 30 s"
        child.listen(now=5.0)
        assert child.heard_at == 5.0
        child.listen(now=6.0)  # nothing new: the last beat stays the one heard
        assert child.heard_at == 5.0
    finally:
        assert child.process is not None
        child.process.kill()
        child.process.wait(30)
        child.exited()
    assert child.beats is None and child.process is None


def test_restarts_back_off_while_a_child_keeps_exiting_soon_after_its_start() -> None:
    exits, delays = 0, []
    for _ in range(8):
        exits, delay = back_off(exits, ran_s=2.0)
        delays.append(delay)
    assert delays == [1, 2, 4, 8, 16, 30, 30, 30]
    assert exits == 8


def test_a_child_that_ran_steadily_is_restarted_after_one_second_again() -> None:
    assert back_off(7, ran_s=STEADY_S) == (1, 1)
    assert back_off(7, ran_s=STEADY_S - 0.1) == (8, 30)
