"""The candidate machine (streams.core.gate.lifecycle)."""

from __future__ import annotations

import itertools

import pytest

from streams.core.errors import IllegalTransition
from streams.core.gate.lifecycle import (
    CANDIDATE,
    CANDIDATE_TRANSITIONS,
    TERMINAL,
    CandidateStatus,
)

S = CandidateStatus
ALLOWED = {
    (S.PROPOSED, S.PENDING),
    (S.PROPOSED, S.SUPERSEDED),
    (S.PROPOSED, S.REJECTED),
    (S.PENDING, S.DISPATCHED),
    (S.PENDING, S.SUPERSEDED),
    (S.PENDING, S.EXPIRED),
    (S.PENDING, S.REJECTED),  # its run withdrew it (an approval failed or was skipped)
}


def test_wire_values_and_table_cover_every_status() -> None:
    assert [s.value for s in S] == [
        "proposed",
        "pending",
        "dispatched",
        "superseded",
        "expired",
        "rejected",
    ]
    assert set(CANDIDATE_TRANSITIONS) == set(S)


@pytest.mark.parametrize(("current", "target"), list(itertools.product(S, S)), ids=str)
def test_exactly_the_listed_moves_are_allowed(current: S, target: S) -> None:
    if (current, target) in ALLOWED:
        assert CANDIDATE.transition(current, target) is target
    else:
        with pytest.raises(IllegalTransition) as info:
            CANDIDATE.transition(current, target)
        assert (info.value.machine, info.value.from_state, info.value.to_state) == (
            "candidate",
            current.value,
            target.value,
        )


def test_terminal_statuses_never_move_and_proposed_cannot_expire() -> None:
    assert {s for s in S if CANDIDATE.is_terminal(s)} == TERMINAL
    assert all(CANDIDATE_TRANSITIONS[s] == frozenset() for s in TERMINAL)
    # Expiry is decided on an accepted candidate only, so it has the candidate's deadline.
    assert S.EXPIRED not in CANDIDATE_TRANSITIONS[S.PROPOSED]
    assert S.DISPATCHED not in CANDIDATE_TRANSITIONS[S.PROPOSED]
