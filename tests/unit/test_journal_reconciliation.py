"""Reconciliation by client order id: the quiet period, proven absence, holds, conflicts."""

from __future__ import annotations

import dataclasses

from schemas.commands import LookupAnswered, ResolveHold, VenueAnswered
from schemas.events import (
    ActionExpired,
    ActionHeld,
    AttemptStarted,
    HoldResolved,
    QueryRequested,
    ReceiptRecorded,
)
from streams.core.journal import SendRequest, effects_of, next_due_ms
from tests.support.journal import (
    E_CLIENT,
    ENTRY_ID,
    MINUTE,
    RUN,
    SECOND,
    T0,
    UNCERTAINTY,
    Venue,
    World,
    dispatch,
    reliable,
)


def unknown_send(world: World) -> None:
    """E1 is attempted at T0; the venue accepts it but answers 'execution status unknown'."""
    world.decide(dispatch())
    world.fault = lambda _: "unknown"
    world.perform()
    world.deliver()
    world.fault = reliable


def entry_attempts(world: World) -> list[AttemptStarted]:
    return [e for e in world.of(AttemptStarted) if e.action_id == ENTRY_ID]


def test_not_found_inside_the_quiet_period_gives_no_second_send() -> None:
    # Accepted at T0 but invisible to lookups for 22 s; quiet period 30 s.
    world = World(Venue(visibility_delay_ms=22 * SECOND))
    unknown_send(world)
    for _ in range(4):  # lookups sent at 0, +5, +10, +15, +20 s: all "not found"
        world.step(5 * SECOND)
    early = [e for e in world.of(ReceiptRecorded) if e.status == "not_found"]
    assert [e.queried_at_ms - T0 for e in early] == [0, 5_000, 10_000, 15_000, 20_000]
    assert all(e.outcome == "unknown" for e in early)
    assert world.status(ENTRY_ID) == "reconciling"
    world.settle()
    assert len(entry_attempts(world)) == 1 and world.venue.accepted[E_CLIENT] == 1
    assert world.status(ENTRY_ID) == "filled"
    filled = next(e for e in world.of(ReceiptRecorded) if e.outcome == "filled")
    assert filled.queried_at_ms == T0 + 25 * SECOND and filled.source == "reconciliation"


def test_absence_is_proven_only_from_the_attempts_absence_after() -> None:
    world = World()
    world.decide(dispatch())
    world.fault = lambda _: "unreached"  # the request never reached the venue
    world.perform()
    world.deliver()
    [attempt] = entry_attempts(world)
    assert attempt.absence_after_ms == T0 + 5 * SECOND + UNCERTAINTY + 30 * SECOND
    world.fault = reliable
    while world.status(ENTRY_ID) == "reconciling":
        world.step(5 * SECOND)
    absent = next(e for e in world.of(ReceiptRecorded) if e.outcome == "absent")
    assert absent.queried_at_ms is not None and absent.queried_at_ms >= attempt.absence_after_ms
    retry = entry_attempts(world)[-1]
    assert (retry.attempt, retry.client_order_id, retry.reason) == (
        2,
        E_CLIENT,
        "after_proven_absence",
    )
    world.settle()
    assert world.venue.accepted[E_CLIENT] == 1


def test_proven_absence_after_the_deadline_expires_the_action() -> None:
    world = World()
    world.decide(dispatch(expires_at_ms=T0 + 20 * SECOND))
    world.fault = lambda _: "unreached"
    world.perform()
    world.deliver()
    world.settle()
    [expired] = world.of(ActionExpired)
    assert (expired.reason, expired.attempts) == ("expired_before_send", 1)
    assert len(entry_attempts(world)) == 1 and world.venue.accepted[E_CLIENT] == 0


def test_unresolved_past_the_budget_is_held_until_resolved() -> None:
    world = World()
    world.decide(dispatch(notification_json=None))
    world.fault = lambda e: "unknown" if isinstance(e, SendRequest) else "unreached"
    world.perform()
    for _ in range(40):
        world.step(5 * SECOND)
    [held] = world.of(ActionHeld)
    assert (held.reason, held.owner, held.attempt) == (
        "reconciliation_budget_exhausted",
        "gateway-1",
        1,
    )
    assert held.held_since_ms >= T0 + 2 * MINUTE
    assert world.status(ENTRY_ID) == "held"
    assert next_due_ms(world.state) is None  # no timer: it waits for an operator
    lookups = len(world.of(QueryRequested))
    world.step(10 * MINUTE)
    assert len(world.of(QueryRequested)) == lookups and len(entry_attempts(world)) == 1

    # Later evidence resolves it (the order was filled all along).
    late = LookupAnswered(
        RUN,
        ENTRY_ID,
        1,
        E_CLIENT,
        "filled",
        "O77",
        "FILLED",
        "0.5",
        "[]",
        None,
        world.now,
        world.now,
    )
    world.decide(late)
    resolved = world.of(HoldResolved)[-1]
    assert (resolved.resolution, resolved.resolved_by) == ("evidence", "venue-evidence")
    assert world.status(ENTRY_ID) == "filled"
    world.settle()
    assert len(entry_attempts(world)) == 1


def test_operator_confirms_absence_then_one_new_attempt() -> None:
    world = World()
    world.decide(dispatch(expires_at_ms=T0 + 30 * MINUTE))
    world.fault = lambda e: "silent"  # nothing reaches the venue and nothing answers
    world.perform()
    for _ in range(40):
        world.step(5 * SECOND)
    assert world.status(ENTRY_ID) == "held"
    bad = ResolveHold("h-0", RUN, ENTRY_ID, "resend_now", "no such resolution", "ops", world.now)
    assert world.decide(bad) == []
    resolve = ResolveHold(
        "h-1", RUN, ENTRY_ID, "confirm_absent", "checked the UI", "ops", world.now
    )
    events = world.decide(resolve)
    assert isinstance(events[0], HoldResolved) and events[0].resolved_by == "ops"
    [retry] = [e for e in events if isinstance(e, AttemptStarted)]
    assert retry.attempt == 2 and retry.client_order_id == E_CLIENT
    world.settle()
    assert world.venue.accepted[E_CLIENT] == 1 and world.status(ENTRY_ID) == "filled"


def test_operator_abandons_a_hold_and_nothing_is_sent() -> None:
    world = World()
    world.decide(dispatch(notification_json=None))
    world.fault = lambda e: "silent"
    world.perform()
    for _ in range(40):
        world.step(5 * SECOND)
    abandon = ResolveHold("h-1", RUN, ENTRY_ID, "abandon", "flattened by hand", "ops", world.now)
    world.decide(abandon)
    assert world.status(ENTRY_ID) == "closed"
    world.settle()
    assert len(entry_attempts(world)) == 1 and world.of(HoldResolved)[-1].resolution == "abandon"


def test_open_order_with_the_same_client_id_is_never_doubled() -> None:
    # A resting limit order is live; a send under its client order id is refused by the venue
    # as a duplicate, which the journal treats as "unknown", not as a rejection.
    world = World(Venue(behaviour={"entry": "rest"}))
    world.decide(dispatch(limit_price="90000"))
    world.perform()
    attempt = entry_attempts(world)[0]
    duplicate = world.venue.submit(dataclasses.replace(_send(world), attempt=1), world.now)
    assert duplicate.error_code == "duplicate_client_order_id"
    world.answers = [dataclasses.replace(duplicate, attempt=attempt.attempt)]
    world.deliver()
    assert world.status(ENTRY_ID) == "reconciling"
    world.settle()
    assert world.status(ENTRY_ID) == "acknowledged" and world.venue.accepted[E_CLIENT] == 1


def _send(world: World) -> SendRequest:
    return next(e for e in effects_of(world.history) if isinstance(e, SendRequest))


def test_conflicting_venue_order_id_is_held() -> None:
    world = World()
    world.decide(dispatch())
    world.settle()
    other = LookupAnswered(
        RUN,
        ENTRY_ID,
        0,
        E_CLIENT,
        "filled",
        "O99",
        "FILLED",
        "0.5",
        "[]",
        None,
        world.now,
        world.now,
    )
    world.decide(other)
    conflict = world.of(ReceiptRecorded)[-1]
    assert conflict.conflict is not None and "O99" in conflict.conflict
    [held] = [e for e in world.of(ActionHeld) if e.action_id == ENTRY_ID]
    assert held.reason == "conflicting_evidence" and world.status(ENTRY_ID) == "held"
    retry = ResolveHold("h-1", RUN, ENTRY_ID, "retry_lookup", "check", "ops", world.now)
    assert world.decide(retry) == []  # a conflict is not a lookup problem: only abandon
    world.step(10 * MINUTE)
    assert len(entry_attempts(world)) == 1


def test_a_late_answer_for_an_absent_attempt_is_a_conflict() -> None:
    world = World()
    world.decide(dispatch())
    world.fault = lambda _: "unreached"
    world.perform()
    world.deliver()
    world.fault = reliable
    while len(entry_attempts(world)) < 2:
        world.step(5 * SECOND)
    late = VenueAnswered(
        RUN, ENTRY_ID, 1, E_CLIENT, "filled", "O50", "FILLED", "0.5", "[]", None, None, world.now
    )
    world.decide(late)
    assert world.status(ENTRY_ID) == "held"
    assert "proven absent" in (world.of(ReceiptRecorded)[-1].conflict or "")


def test_answers_that_do_not_match_the_journal_are_ignored() -> None:
    world = World()
    world.decide(dispatch())
    before = list(world.history)
    wrong_id = VenueAnswered(
        RUN, ENTRY_ID, 1, "other-E", "filled", "O1", "FILLED", "0.5", "[]", None, None, T0
    )
    future = VenueAnswered(
        RUN, ENTRY_ID, 2, E_CLIENT, "filled", "O1", "FILLED", "0.5", "[]", None, None, T0
    )
    other_run = dataclasses.replace(future, run_id="run-" + "1" * 24, attempt=1)
    never_asked = LookupAnswered(
        RUN, ENTRY_ID, 5, E_CLIENT, "not_found", None, None, None, None, None, T0, T0
    )
    for answer in (wrong_id, future, other_run, never_asked):
        assert world.decide(answer) == []
    assert world.history == before
