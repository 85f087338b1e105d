"""Run and branch-slot lifecycle machines (streams.core.lifecycle)."""

from __future__ import annotations

import itertools

import pytest

from streams.core.errors import IllegalTransition
from streams.core.lifecycle import (
    BRANCH,
    BRANCH_TRANSITIONS,
    RUN,
    RUN_TRANSITIONS,
    BranchStatus,
    Machine,
    RunStatus,
    deduplication_reason,
    run_status_from_slots,
)

B = BranchStatus
R = RunStatus


def transition(current: RunStatus | BranchStatus, target: RunStatus | BranchStatus) -> object:
    machine: Machine[RunStatus] | Machine[BranchStatus] = (
        RUN if isinstance(current, RunStatus) else BRANCH
    )
    return machine.transition(current, target)  # type: ignore[arg-type]


def test_wire_values() -> None:
    assert [s.value for s in RunStatus] == ["pending", "running", "completed", "skipped", "failed"]
    assert [s.value for s in BranchStatus] == [
        "launched",
        "started",
        "completed",
        "failed",
        "skipped",
    ]


def test_tables_cover_every_state() -> None:
    assert set(RUN_TRANSITIONS) == set(RunStatus)
    assert set(BRANCH_TRANSITIONS) == set(BranchStatus)


@pytest.mark.parametrize(
    ("current", "target"),
    [
        (R.PENDING, R.RUNNING),
        (R.PENDING, R.COMPLETED),
        (R.PENDING, R.FAILED),
        (R.PENDING, R.SKIPPED),
        (R.RUNNING, R.COMPLETED),
        (R.RUNNING, R.FAILED),
        (R.RUNNING, R.SKIPPED),
        (B.LAUNCHED, B.STARTED),
        (B.LAUNCHED, B.LAUNCHED),
        (B.LAUNCHED, B.COMPLETED),
        (B.STARTED, B.LAUNCHED),
        (B.STARTED, B.FAILED),
        (B.STARTED, B.SKIPPED),
    ],
)
def test_allowed_moves(current: RunStatus | BranchStatus, target: RunStatus | BranchStatus) -> None:
    assert transition(current, target) is target


@pytest.mark.parametrize(
    ("current", "target", "machine"),
    [
        (R.COMPLETED, R.RUNNING, "run"),
        (R.RUNNING, R.PENDING, "run"),
        (R.FAILED, R.COMPLETED, "run"),
        (R.PENDING, R.PENDING, "run"),
        (B.COMPLETED, B.LAUNCHED, "branch"),
        (B.FAILED, B.STARTED, "branch"),
        (B.SKIPPED, B.COMPLETED, "branch"),
        (B.STARTED, B.STARTED, "branch"),
    ],
)
def test_illegal_moves_raise_with_context(
    current: RunStatus | BranchStatus, target: RunStatus | BranchStatus, machine: str
) -> None:
    with pytest.raises(IllegalTransition) as info:
        transition(current, target)
    err = info.value
    assert (err.machine, err.from_state, err.to_state) == (machine, current.value, target.value)


def test_finished_states_never_move() -> None:
    for status in BranchStatus:
        assert BRANCH.is_terminal(status) == (not BRANCH_TRANSITIONS[status])
    for run_status in RunStatus:
        assert RUN.is_terminal(run_status) == (not RUN_TRANSITIONS[run_status])


@pytest.mark.parametrize(
    ("slots", "expected"),
    [
        ([B.LAUNCHED, B.LAUNCHED, B.LAUNCHED], R.PENDING),
        ([None, None, None], R.PENDING),
        ([B.STARTED, B.LAUNCHED, B.LAUNCHED], R.RUNNING),
        ([B.COMPLETED, B.LAUNCHED, None], R.RUNNING),
        ([B.COMPLETED, B.COMPLETED, B.COMPLETED], R.COMPLETED),
        ([B.COMPLETED, B.SKIPPED, B.COMPLETED], R.COMPLETED),
        ([B.SKIPPED, B.SKIPPED, B.SKIPPED], R.SKIPPED),
        ([B.COMPLETED, B.FAILED, B.SKIPPED], R.FAILED),
        ([B.COMPLETED, B.COMPLETED, None], R.RUNNING),
    ],
)
def test_run_status_from_slots(slots: list[BranchStatus | None], expected: RunStatus) -> None:
    assert run_status_from_slots(slots) is expected


def test_run_status_is_monotonic() -> None:
    # A relaunch puts the only started slot back to launched; the run stays running.
    assert run_status_from_slots([B.LAUNCHED, B.LAUNCHED], R.RUNNING) is R.RUNNING
    assert run_status_from_slots([B.LAUNCHED], R.COMPLETED) is R.COMPLETED


def test_derived_run_moves_are_always_legal() -> None:
    values: list[BranchStatus | None] = [None, *BranchStatus]
    for previous in RunStatus:
        for slots in itertools.product(values, repeat=3):
            status = run_status_from_slots(slots, previous)
            if status is not previous:
                RUN.transition(previous, status)


def test_deduplication_reasons() -> None:
    assert deduplication_reason(R.PENDING) == "in_flight"
    assert deduplication_reason(R.RUNNING) == "in_flight"
    assert deduplication_reason(R.COMPLETED) == "completed"
    assert deduplication_reason(R.SKIPPED) == "skipped"
    assert deduplication_reason(R.FAILED) == "failed"


def test_every_core_machine_is_one_mechanism() -> None:
    from streams.core.gate.lifecycle import CANDIDATE
    from streams.core.journal.lifecycle import ACTION

    machines = (RUN, BRANCH, CANDIDATE, ACTION)
    assert [m.name for m in machines] == ["run", "branch", "candidate", "action"]
    assert all(isinstance(m, Machine) for m in machines)


def test_a_machine_refuses_a_terminal_status_that_moves_and_names_a_new_entity() -> None:
    with pytest.raises(ValueError, match="terminal"):
        Machine("run", RUN_TRANSITIONS, frozenset({R.RUNNING}))
    starting: Machine[RunStatus] = Machine(
        "run", RUN_TRANSITIONS, frozenset({R.COMPLETED}), frozenset({R.PENDING})
    )
    assert starting.transition(None, R.PENDING) is R.PENDING
    with pytest.raises(IllegalTransition) as info:
        starting.transition(None, R.RUNNING)
    assert (info.value.from_state, info.value.to_state) == ("new", "running")
