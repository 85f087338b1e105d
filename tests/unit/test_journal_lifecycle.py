"""The action lifecycle machine, and evolve refusing histories decide cannot produce."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from schemas.events import (
    ActionExpired,
    AttemptStarted,
    ReceiptRecorded,
    RecoveryReceiptRecorded,
    RunCheckpointed,
)
from streams.core.errors import IllegalTransition, InconsistentHistory
from streams.core.journal import ACTION_TRANSITIONS, ActionStatus, Owner, evolve
from streams.core.journal.attempts import dispatch_intent
from streams.core.journal.lifecycle import ACTION, SETTLED, is_done
from tests.support.journal import ENTRY_ID, RUN, T0, decide_steps, dispatch, fold

A = ActionStatus
OWNER = Owner("gateway-1", 1)


def test_table_covers_every_status_and_settled_ones_only_reopen_as_held() -> None:
    assert set(ACTION_TRANSITIONS) == set(ActionStatus)
    assert ACTION_TRANSITIONS[A.NOT_NEEDED] == frozenset()
    for status in SETTLED - {A.NOT_NEEDED, A.ACKNOWLEDGED}:
        assert ACTION_TRANSITIONS[status] == frozenset({A.HELD}), status
    # Nothing settled or held can be attempted again; only a proven absence can.
    attempt_from = {s for s, targets in ACTION_TRANSITIONS.items() if A.ATTEMPTED in targets}
    assert attempt_from == {A.INTENDED, A.ABSENT}
    assert is_done(A.HELD) and not is_done(A.RECONCILING)


def test_transition_raises_for_every_move_outside_the_table() -> None:
    for current, target in itertools.product(ActionStatus, ActionStatus):
        if target in ACTION_TRANSITIONS[current]:
            assert ACTION.transition(current, target) is target
        else:
            with pytest.raises(IllegalTransition):
                ACTION.transition(current, target)
    assert ACTION.transition(None, A.INTENDED) is A.INTENDED
    with pytest.raises(IllegalTransition, match="new -> attempted"):
        ACTION.transition(None, A.ATTEMPTED)


def _attempted() -> list[object]:
    return list(decide_steps(None, dispatch(notification_json=None), T0, OWNER))


def _receipt(attempt: int, outcome: str = "filled") -> ReceiptRecorded:
    return ReceiptRecorded(
        ENTRY_ID, RUN, "entry", attempt, RUN[4:] + "-E", outcome, "O77", "FILLED", "0.5", "[]",
        "send_response", None, T0, None, None, None, T0,
    )  # fmt: skip


def test_a_receipt_for_an_action_never_attempted_is_illegal() -> None:
    state = fold([dispatch_intent(dispatch(), T0)])
    with pytest.raises(IllegalTransition, match="intended -> filled"):
        evolve(state, _receipt(0))


def test_an_attempt_after_an_expiry_is_illegal() -> None:
    intent = dispatch_intent(dispatch(), T0)
    expired = ActionExpired(ENTRY_ID, RUN, "entry", "expired_before_send", 0, T0, None, 0, T0)
    state = fold([intent, expired])
    attempt = next(e for e in _attempted() if isinstance(e, AttemptStarted))
    with pytest.raises(IllegalTransition, match="expired -> attempted"):
        evolve(state, attempt)


def test_a_second_intent_and_attempts_out_of_order_are_refused() -> None:
    events = _attempted()
    state = fold(events)  # type: ignore[arg-type]
    with pytest.raises(IllegalTransition):
        evolve(state, dispatch_intent(dispatch(), T0))
    attempt = next(e for e in events if isinstance(e, AttemptStarted))
    with pytest.raises(IllegalTransition):
        evolve(state, dataclasses.replace(attempt, attempt=2))  # attempted -> attempted
    with pytest.raises(InconsistentHistory, match="current is 1"):
        evolve(state, _receipt(2))


def test_records_of_another_run_or_a_missing_recovery_are_refused() -> None:
    state = fold(_attempted())  # type: ignore[arg-type]
    with pytest.raises(InconsistentHistory, match="applied to run"):
        evolve(state, dataclasses.replace(_receipt(1), run_id="run-" + "1" * 24))
    receipt = RecoveryReceiptRecorded(RUN, f"{RUN}.R1", None, (), "[]", (), None, (), T0)
    with pytest.raises(InconsistentHistory, match="not open"):
        evolve(state, receipt)
    with pytest.raises(InconsistentHistory, match="after sequence"):
        evolve(state, RunCheckpointed(RUN, "C1", 1, 3, "{}", (), T0))
