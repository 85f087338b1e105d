"""``evolve_all`` is ``evolve`` applied event by event: the same state, the same error.

The engine folds each decision's events with ``evolve_all``, which takes a new run's
``RunAdmitted`` and its launches in one step; these properties throw at it the sequences a
decision makes and corrupted ones (launches dropped, repeated, reordered, for another run,
key or slot, a rerun number off, other events mixed in, a state already there).
"""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.events import BranchLaunched, BranchStarted, DeliveryDeduplicated, RunAdmitted
from streams.core.admission import (
    AdmissionEvent,
    Admit,
    OccurrenceState,
    decide,
    evolve,
    evolve_all,
)
from streams.core.errors import CoreError
from tests.support.core import MINUTE, T0, candle, delivery, workflow

NOW = T0 + 10 * MINUTE
WORKFLOW = workflow()


def admitted_events(index: int) -> list[AdmissionEvent]:
    payload = candle(event_id=f"evt-{index}")
    return list(decide(None, Admit(delivery(WORKFLOW, payload, f"d-{index}", NOW), WORKFLOW), NOW))


def one_by_one(
    state: OccurrenceState | None, events: list[AdmissionEvent]
) -> OccurrenceState | tuple[type, str] | None:
    try:
        for event in events:
            state = evolve(state, event)
    except CoreError as e:
        return type(e), str(e)
    return state


def all_at_once(
    state: OccurrenceState | None, events: list[AdmissionEvent]
) -> OccurrenceState | tuple[type, str] | None:
    try:
        return evolve_all(state, events)
    except CoreError as e:
        return type(e), str(e)


def test_a_new_run_and_its_launches_fold_to_what_evolve_makes() -> None:
    events = admitted_events(0)
    assert [type(e) for e in events] == [
        RunAdmitted,
        BranchLaunched,
        BranchLaunched,
        BranchLaunched,
    ]
    folded = evolve_all(None, events)
    assert folded is not None
    assert folded == one_by_one(None, events)
    launched = [e.slot for e in events if isinstance(e, BranchLaunched)]
    assert [s.slot for s in folded.runs[0].slots] == launched


def test_an_unchanged_state_is_the_same_object() -> None:
    state = evolve_all(None, admitted_events(0))
    duplicate = DeliveryDeduplicated(
        delivery_id="d-9",
        admission_key=state.admission_key if state else "",
        run_id=state.runs[0].run_id if state else "",
        reason="duplicate",
        received_at_ms=NOW,
        decided_at_ms=NOW,
    )
    assert evolve_all(state, [duplicate]) is state
    assert evolve_all(None, []) is None


MUTATIONS = st.sampled_from(
    [
        "none",
        "drop",
        "repeat",
        "swap",
        "other_run",
        "other_key",
        "unknown_slot",
        "rerun_number",
        "start_one",
        "append_duplicate",
        "other_launch",
        "zero_timeout",
        "other_timeout",
        "state_before",
    ]
)


def mutate(
    events: list[AdmissionEvent], how: str, at: int, other: list[AdmissionEvent]
) -> tuple[OccurrenceState | None, list[AdmissionEvent]]:
    launches = [e for e in events[1:] if isinstance(e, BranchLaunched)]
    first = events[0]
    if not isinstance(first, RunAdmitted) or not launches:
        return None, events
    pick = launches[at % len(launches)]
    if how == "drop":
        return None, [first, *(e for e in launches if e is not pick)]
    if how == "repeat":
        return None, [first, *launches, pick]
    if how == "swap":
        return None, [first, *reversed(launches)]
    if how == "other_run":
        return None, [first, *launches[:-1], dataclasses.replace(pick, run_id="run-other")]
    if how == "other_key":
        return None, [first, *launches[:-1], dataclasses.replace(pick, admission_key="x/y/z")]
    if how == "unknown_slot":
        return None, [first, *launches[:-1], dataclasses.replace(pick, slot="nowhere")]
    if how == "rerun_number":
        return None, [dataclasses.replace(first, rerun_number=1), *launches]
    if how == "start_one":
        started = BranchStarted(
            run_id=pick.run_id,
            admission_key=pick.admission_key,
            slot=pick.slot,
            attempt=pick.attempt,
            worker="w",
            started_at_ms=NOW,
        )
        return None, [first, *launches, started]
    if how == "append_duplicate":
        return None, [first, *launches, *other[:1]]
    if how == "other_launch":
        return None, [first, *launches, other[1]]
    if how in ("zero_timeout", "other_timeout"):
        due = pick.launched_at_ms if how == "zero_timeout" else pick.timeout_at_ms + MINUTE
        moved = dataclasses.replace(pick, timeout_at_ms=due)
        return None, [first, *(moved if e is pick else e for e in launches)]
    if how == "state_before":
        return one_by_one_state(other), [first, *launches]
    return None, [first, *launches]


def one_by_one_state(events: list[AdmissionEvent]) -> OccurrenceState | None:
    state = None
    for event in events:
        state = evolve(state, event)
    return state


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(MUTATIONS, st.integers(0, 5)), min_size=1, max_size=3), st.integers(0, 3))
def test_evolve_all_equals_evolve_event_by_event(
    mutations: list[tuple[str, int]], other_index: int
) -> None:
    events = admitted_events(100)
    other = admitted_events(101 + other_index)
    state: OccurrenceState | None = None
    for how, at in mutations:
        before, events = mutate(events, how, at, other)
        state = before if before is not None else state
    assert all_at_once(state, events) == one_by_one(state, events)
