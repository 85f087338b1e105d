"""An engine instance's phase for its probes: the allowed changes, readiness and health."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.engine.status import (
    ALLOWED,
    IllegalPhaseChange,
    InstanceStatus,
    Phase,
    describe,
    healthy,
    ready,
)
from tests.support.clocks import ManualClock


def status_in(phase: Phase, clock: ManualClock | None = None) -> InstanceStatus:
    """A status brought to ``phase`` along allowed changes."""
    status = InstanceStatus(stalled_after_s=60.0, clock=clock or ManualClock())
    path = {
        Phase.STARTING: [],
        Phase.RESTORING: [Phase.RESTORING],
        Phase.RUNNING: [Phase.RESTORING, Phase.RUNNING],
        Phase.STARTING_OVER: [Phase.STARTING_OVER],
        Phase.STOPPED: [Phase.STOPPED],
    }[phase]
    for step in path:
        status.enter(step, "why" if step is Phase.STARTING_OVER else None)
    return status


@pytest.mark.parametrize("before", list(Phase))
@pytest.mark.parametrize("after", list(Phase))
def test_only_the_listed_changes_are_allowed(before: Phase, after: Phase) -> None:
    status = status_in(before)
    if after in ALLOWED[before] or (after is before and after is not Phase.STARTING_OVER):
        status.enter(after)
        assert status.snapshot().phase is after
    else:
        with pytest.raises(IllegalPhaseChange, match=f"{before.value} cannot become"):
            status.enter(after)
        assert status.snapshot().phase is before


def test_a_stopped_instance_stays_stopped_and_keeps_why() -> None:
    status = status_in(Phase.RUNNING)
    status.enter(Phase.STOPPED, "ProcessorFenced: another instance took the id")
    status.enter(Phase.STOPPED)  # run()'s finally after its except: no change
    assert status.snapshot().reason == "ProcessorFenced: another instance took the id"
    for phase in set(Phase) - {Phase.STOPPED}:
        with pytest.raises(IllegalPhaseChange):
            status.enter(phase)


def test_start_overs_in_a_row_reset_once_running() -> None:
    clock = ManualClock()
    status = status_in(Phase.RUNNING, clock)
    for attempt in range(3):
        clock.now += 5
        status.enter(Phase.STARTING_OVER, f"RestoreTimedOut: attempt {attempt}")
        status.enter(Phase.RESTORING)
    status.enter(Phase.STARTING_OVER, "RestoreTimedOut: again")
    now = status.snapshot()
    assert (now.phase, now.starts_over, now.failed_in_a_row) == (Phase.STARTING_OVER, 4, 4)
    assert now.reason == "RestoreTimedOut: again"
    assert now.since == clock.now
    status.enter(Phase.RESTORING)
    assert status.snapshot().reason is None
    status.enter(Phase.RUNNING)
    assert (status.snapshot().starts_over, status.snapshot().failed_in_a_row) == (4, 0)


def test_ready_only_while_running() -> None:
    for phase in Phase:
        assert ready(status_in(phase).snapshot()) is (phase is Phase.RUNNING)


def test_a_running_loop_that_stops_coming_round_is_unhealthy() -> None:
    clock = ManualClock()
    status = status_in(Phase.RUNNING, clock)
    status.holding((0, 2))
    status.came_round()
    clock.now += 60.0
    assert healthy(status.snapshot(), clock.now, 60.0)
    clock.now += 0.5
    assert not healthy(status.snapshot(), clock.now, 60.0)
    body = describe(status.snapshot(), clock.now, 60.0)
    assert body["healthy"] is False and body["ready"] is True
    assert body["loop_seconds_ago"] == 60.5 and body["assigned"] == [0, 2]
    status.came_round()
    assert healthy(status.snapshot(), clock.now, 60.0)


@pytest.mark.parametrize("phase", [Phase.STARTING, Phase.RESTORING, Phase.STARTING_OVER])
def test_waiting_for_the_broker_is_healthy_however_long(phase: Phase) -> None:
    """A restarted process would wait for the same broker: restarting it does not help."""
    clock = ManualClock()
    status = status_in(phase, clock)
    clock.now += 3600.0
    assert healthy(status.snapshot(), clock.now, 60.0)
    assert not ready(status.snapshot())


def test_stopped_is_unhealthy() -> None:
    assert not healthy(status_in(Phase.STOPPED).snapshot(), 0.0, 60.0)


@given(st.lists(st.sampled_from(list(Phase)), max_size=40))
def test_any_sequence_of_requests_keeps_the_counts(requests: list[Phase]) -> None:
    """Whatever the engine asks, refused changes leave the status as it was, and the counts
    say how many start-overs were accepted, in all and since the last ``running``."""
    status = InstanceStatus(stalled_after_s=60.0, clock=ManualClock())
    accepted_over = since_running = 0
    for phase in requests:
        before = status.snapshot()
        try:
            status.enter(phase, "why")
        except IllegalPhaseChange:
            assert status.snapshot() == before
            assert phase not in ALLOWED[before.phase]
            continue
        if status.snapshot() is before:
            assert phase is before.phase
            continue
        accepted_over += phase is Phase.STARTING_OVER
        since_running = (
            0 if phase is Phase.RUNNING else since_running + (phase is Phase.STARTING_OVER)
        )
        now = status.snapshot()
        assert (now.starts_over, now.failed_in_a_row) == (accepted_over, since_running)
        assert (now.reason is not None) is (phase in (Phase.STARTING_OVER, Phase.STOPPED))
