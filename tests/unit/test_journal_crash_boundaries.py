"""Every crash boundary of the article, for each action (E1, P1, N1), twice in a row.

A clean run gives the reference history. A crash at a boundary is that history truncated at
the boundary; the venue keeps what the committed prefix sent (optionally without the send of
the last dispatch-start: "no send" vs "remote acceptance"). The gateway restarts from the
prefix and recovers; its recovery's lookups or sends are performed but every answer is lost
and it crashes again; a third owner recovers and the run is driven to the end.

Expected each time: exactly one order per action at the venue (one E1, one O77) and every
action ends with a receipt (or, where nothing could be established, a hold).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from schemas.events import (
    ActionIntended,
    AttemptStarted,
    ReceiptRecorded,
    RunCheckpointed,
)
from streams.core.journal import JournalEvent, SendRequest, effects_of
from tests.support.journal import (
    ENTRY_ID,
    NOTIFICATION_ID,
    PROTECTION_ID,
    SECOND,
    T0,
    Venue,
    World,
    dispatch,
)

ACTIONS = (ENTRY_ID, PROTECTION_ID, NOTIFICATION_ID)


def reference() -> list[JournalEvent]:
    world = World()
    world.decide(dispatch())
    world.settle()
    assert all(world.venue.accepted[c] == 1 for c in world.venue.accepted)
    return world.history


HISTORY = reference()


def _index(predicate: Callable[[JournalEvent], bool]) -> int:
    return next(i for i, e in enumerate(HISTORY) if predicate(e))


def _of(kind: type, action_id: str) -> Callable[[JournalEvent], bool]:
    return lambda e: isinstance(e, kind) and getattr(e, "action_id", None) == action_id


def boundary(name: str, action_id: str) -> int:
    """How many records of the reference history committed before the crash."""
    intent = _index(_of(ActionIntended, action_id))
    if name == "before_intent":
        return intent
    if name == "after_intent":
        return intent + 1
    if name in ("after_attempt_no_send", "after_attempt_accepted"):
        return _index(_of(AttemptStarted, action_id)) + 1
    receipt = _index(_of(ReceiptRecorded, action_id))
    if name == "after_receipt":
        return receipt + 1
    assert name == "after_advance"
    return next(
        i + 1 for i, e in enumerate(HISTORY) if i > receipt and isinstance(e, RunCheckpointed)
    )


def venue_after(prefix: list[JournalEvent], *, send_last: bool) -> Venue:
    """The venue after the committed prefix's sends (all, or all but the last)."""
    venue = Venue()
    sends = [e for e in effects_of(prefix) if isinstance(e, SendRequest)]
    if not send_last and sends and isinstance(prefix[-1], AttemptStarted):
        sends = sends[:-1]
    for send in sends:
        venue.submit(send, send.timestamp_ms)
    return venue


def restart_twice(prefix: list[JournalEvent], venue: Venue, crash_at: int) -> World:
    world = World(venue, now=crash_at)
    world.history = list(prefix)
    world.dispatched = dispatch()
    world.crash()
    world.now += 1 * SECOND
    world.fault = lambda _: "lost"  # the recovery's requests go out; every answer is lost
    world.perform()
    world.now += 20 * SECOND
    world.crash()
    world.settle()
    return world


def assert_one_order_each_and_settled(world: World) -> None:
    for action_id in ACTIONS:
        client = world.state.action(action_id).intent.client_order_id  # type: ignore[union-attr]
        assert world.venue.accepted[client] == 1, f"{action_id}: {world.venue.accepted}"
        assert world.status(action_id) in ("filled", "acknowledged"), world.status(action_id)


def test_each_boundary_is_a_decision_and_so_a_transaction_of_its_own() -> None:
    # The intent, the checkpoint, the dispatch-start, the receipt, the checkpoint's advance
    # and the next action's intent (and sizing) are each one decision with one record: the
    # engine commits each in its own transaction, so a crash can fall between any two.
    world = World()
    world.decide(dispatch())
    world.settle()
    assert world.history == HISTORY
    assert world.decisions == [1] * len(HISTORY)
    kinds = [type(e).__name__ for e in HISTORY]
    assert kinds[:5] == [
        "ActionIntended",
        "RunCheckpointed",
        "AttemptStarted",
        "ReceiptRecorded",
        "RunCheckpointed",
    ]


BOUNDARIES = (
    "before_intent",
    "after_intent",
    "after_attempt_no_send",
    "after_attempt_accepted",
    "after_receipt",
    "after_advance",
)


@pytest.mark.parametrize("action_id", ACTIONS, ids=lambda a: a.rpartition(".")[2])
@pytest.mark.parametrize("name", BOUNDARIES)
def test_crash_at_boundary_twice(name: str, action_id: str) -> None:
    keep = boundary(name, action_id)
    prefix = HISTORY[:keep]
    venue = venue_after(prefix, send_last=name != "after_attempt_no_send")
    last = max((getattr(e, "checkpointed_at_ms", 0) for e in prefix), default=T0)
    world = restart_twice(prefix, venue, max(last, T0) + 20 * SECOND)
    assert_one_order_each_and_settled(world)
    if name == "after_attempt_no_send":
        # The attempt never left: recovery proved its absence, then re-attempted under the
        # same client order id.
        [*_, retry] = [e for e in world.of(AttemptStarted) if e.action_id == action_id]
        assert retry.attempt == 2 and retry.reason == "after_proven_absence"
    if name in ("after_attempt_accepted", "after_receipt", "after_advance"):
        assert [e.attempt for e in world.of(AttemptStarted) if e.action_id == action_id] == [1]


@pytest.mark.parametrize("send_last", [True, False], ids=["accepted", "no_send"])
def test_every_prefix_of_the_trace_recovers_with_one_order_per_action(send_last: bool) -> None:
    for keep in range(len(HISTORY) + 1):
        prefix = HISTORY[:keep]
        world = restart_twice(prefix, venue_after(prefix, send_last=send_last), T0 + 60 * SECOND)
        assert_one_order_each_and_settled(world)
