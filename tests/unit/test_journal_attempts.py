"""The final re-check before an attempt, and what an attempt asks the shell to do."""

from __future__ import annotations

import orjson
import pytest

from schemas.events import (
    ActionExpired,
    ActionHeld,
    ActionIntended,
    AttemptStarted,
    QueryRequested,
    RunCheckpointed,
)
from streams.core.durations import parse_time
from streams.core.journal import (
    AcceptDispatch,
    JournalPolicy,
    LookupRequest,
    Owner,
    SendRequest,
    decide,
    effects_of,
)
from streams.core.journal.errors import InvalidPolicy
from tests.support.journal import (
    E_CLIENT,
    ENTRY_ID,
    MINUTE,
    NOTIFICATION_ID,
    POLICY,
    RUN,
    SECOND,
    T0,
    UNCERTAINTY,
    World,
    decide_steps,
    dispatch,
    fold,
)

OWNER = Owner("gateway-1", 7)


def test_dispatch_records_intent_checkpoint_then_attempt_each_in_a_decision_of_its_own() -> None:
    # The dispatch itself records the intent only: the checkpoint and the dispatch-start are
    # later steps, each its own decision (and so its own transaction in the engine).
    assert [type(e) for e in decide(None, dispatch(), T0, OWNER)] == [ActionIntended]
    world = World()
    world.decide(dispatch())
    assert world.decisions[:3] == [1, 1, 1]
    events = decide_steps(None, dispatch(), T0, OWNER)
    assert [type(e) for e in events[:3]] == [type(e) for e in world.history[:3]]
    intent, checkpoint, attempt = events[:3]
    assert isinstance(intent, ActionIntended) and intent.client_order_id == E_CLIENT
    assert len(E_CLIENT) == 26
    assert isinstance(checkpoint, RunCheckpointed) and checkpoint.next_tasks == (ENTRY_ID,)
    assert isinstance(attempt, AttemptStarted)
    assert (attempt.attempted_at_ms, attempt.recv_window_ms) == (T0, POLICY.recv_window_ms)
    assert (attempt.owner_instance, attempt.owner_generation) == ("gateway-1", 7)
    assert attempt.send_by_ms == T0 + POLICY.recv_window_ms
    assert orjson.loads(attempt.request_json) == {
        "kind": "entry",
        "side": "buy",
        "type": "market",
        "quantity": "0.5",
        "notional": None,
        "limit_price": None,
        "params": {},
    }
    [send] = effects_of(events)
    assert isinstance(send, SendRequest)
    assert (send.client_order_id, send.timestamp_ms, send.attempt) == (E_CLIENT, T0, 1)


def test_only_attempt_started_yields_a_send() -> None:
    world = World()
    world.decide(dispatch())
    world.settle()
    for event in world.history:
        sends = [e for e in effects_of([event]) if isinstance(e, SendRequest)]
        assert len(sends) == (1 if isinstance(event, AttemptStarted) else 0)
    lookups = effects_of(
        [QueryRequested(ENTRY_ID, RUN, "entry", "order", 1, E_CLIENT, "v", "a", "i", "r", T0)]
    )
    assert isinstance(lookups[0], LookupRequest)


@pytest.mark.parametrize(
    ("expires_in", "authorized_in", "outcome"),
    [
        (UNCERTAINTY, None, "expired_before_send"),  # now + uncertainty == expires: fails
        (UNCERTAINTY + 1, None, "attempt"),
        (UNCERTAINTY - 1, None, "expired_before_send"),
        (10 * MINUTE, UNCERTAINTY, "authorization_lapsed"),
        (10 * MINUTE, UNCERTAINTY + 1, "attempt"),
    ],
)
def test_deadline_and_authorization_are_rechecked_strictly(
    expires_in: int, authorized_in: int | None, outcome: str
) -> None:
    command = dispatch(
        expires_at_ms=T0 + expires_in,
        authorized_until_ms=None if authorized_in is None else T0 + authorized_in,
        notification_json=None,
    )
    events = decide_steps(None, command, T0, OWNER)
    attempts = [e for e in events if isinstance(e, AttemptStarted)]
    expired = [e for e in events if isinstance(e, ActionExpired)]
    if outcome == "attempt":
        assert len(attempts) == 1 and not expired
    else:
        assert not attempts and [e.reason for e in expired] == [outcome]
        assert expired[0].attempts == 0 and expired[0].checked_at_ms == T0
        assert not any(isinstance(e, SendRequest) for e in effects_of(events))


def test_send_by_is_the_earlier_of_recv_window_and_deadline() -> None:
    events = decide_steps(None, dispatch(expires_at_ms=T0 + 2 * SECOND), T0, OWNER)
    [attempt] = [e for e in events if isinstance(e, AttemptStarted)]
    assert attempt.send_by_ms == T0 + 2 * SECOND - UNCERTAINTY


def test_queued_signal_fixture_expires_and_a_redelivery_does_not_restart_it() -> None:
    # Source 12:00:00, 5 s window: expires 12:00:05.000; the gateway is ready at 12:00:05.100.
    source = parse_time("2026-11-30T12:00:00Z")
    command = dispatch(
        source_time_ms=source,
        expires_at_ms=source + 5_000,
        validity_window_ms=5_000,
        clock_uncertainty_ms=0,
        dispatched_at_ms=source + 4_600,
        notification_json=None,
    )
    events = decide_steps(None, command, source + 5_100, OWNER)
    assert [type(e) for e in events] == [
        ActionIntended,
        RunCheckpointed,
        ActionExpired,
        RunCheckpointed,
    ]
    state = fold(events)
    assert decide(state, command, source + 7_000, OWNER) == []  # redelivered at 12:00:07


def test_unsent_action_whose_deadline_lapsed_during_downtime_expires_on_recovery() -> None:
    world = World()
    world.decide(dispatch(expires_at_ms=T0 + 30 * SECOND))
    world.now = T0 + 1 * MINUTE
    world.crash(keep=2)  # the intent and C1 committed; the attempt did not
    expired = [e for e in world.of(ActionExpired) if e.action_id == ENTRY_ID]
    assert [e.reason for e in expired] == ["expired_before_send"]
    world.settle()
    assert world.venue.accepted[E_CLIENT] == 0
    assert world.status(NOTIFICATION_ID) == "acknowledged"  # it reports the expiry


def test_unsent_action_whose_authorization_lapsed_during_downtime_expires() -> None:
    world = World()
    world.decide(dispatch(authorized_until_ms=T0 + 30 * SECOND))
    world.now = T0 + 1 * MINUTE
    world.crash(keep=2)
    assert [e.reason for e in world.of(ActionExpired)] == ["authorization_lapsed"]


@pytest.mark.parametrize(
    "overrides",
    [
        {"side": "long"},
        {"quantity": None},
        {"quantity": "0.5", "notional": "100"},
        {"quantity": "-1"},
        {"quantity": "NaN"},
        {"limit_price": "cheap"},
        {"params_json": "[]"},
        {"run_id": "run-bad id!", "action_id": "run-bad id!.entry"},
    ],
)
def test_an_unusable_dispatch_is_held_and_never_sent(overrides: dict[str, object]) -> None:
    events = decide_steps(None, dispatch(**overrides), T0, OWNER)
    held = [e for e in events if isinstance(e, ActionHeld)]
    assert [e.reason for e in held] == ["invalid_dispatch"] and held[0].detail
    assert not [e for e in events if isinstance(e, AttemptStarted)]


def test_dispatches_that_are_not_this_runs_entry_or_exit_are_ignored() -> None:
    assert decide(None, dispatch(kind="protection", action_id=f"{RUN}.protection"), T0, OWNER) == []
    assert decide(None, dispatch(action_id=f"{RUN}.exit"), T0, OWNER) == []
    state = fold(decide(None, dispatch(), T0, OWNER))
    assert decide(state, dispatch(), T0 + 1, OWNER) == []  # the same dispatch again
    assert decide(state, dispatch(kind="exit", action_id=f"{RUN}.exit"), T0 + 1, OWNER) == []


def test_exit_has_no_protection() -> None:
    world = World()
    world.decide(dispatch(kind="exit", action_id=f"{RUN}.exit", side="sell"))
    world.settle()
    assert [a.slot for a in world.state.actions] == ["exit", "notification"]  # type: ignore[union-attr]


def test_policy_must_allow_absence_to_be_proven_before_a_hold() -> None:
    with pytest.raises(InvalidPolicy, match="before absence can be proven"):
        JournalPolicy(reconciliation_budget_ms=30_000)
    with pytest.raises(InvalidPolicy):
        JournalPolicy(lookup_interval_ms=0)


def test_notional_entry_sends_notional() -> None:
    events = decide_steps(None, dispatch(quantity=None, notional="48500"), T0, OWNER)
    [attempt] = [e for e in events if isinstance(e, AttemptStarted)]
    body = orjson.loads(attempt.request_json)
    assert (body["quantity"], body["notional"]) == (None, "48500")


def test_accept_dispatch_type_is_the_core_mirror() -> None:
    assert AcceptDispatch.__module__ == "streams.core.journal.commands"
