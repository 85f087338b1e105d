"""The checkpoint-recovery article's fixture: E1, P1, N1; C17 says entry next; O77 is lost.

| 09:00:00 | C17 says entry is next; E1 holds the approved request |
| 09:00:01 | E1 dispatch-start commits; the worker sends it         |
| 09:00:02 | the venue fills O77; the response is lost; crash       |
| 09:00:20 | recovery loads C17 + the newer dispatch record: lookup |
| 09:00:22 | lookup links E1 to O77; the receipt commits            |
| 09:00:23 | C18 records the recovered entry and selects P1         |

The trace must hold one E1 dispatch; a second crash after the receipt and before C18 must
still find the receipt and advance without sending E1 again.
"""

from __future__ import annotations

import orjson

from schemas.events import (
    AttemptStarted,
    QueryRequested,
    ReceiptRecorded,
    RecoveryReceiptRecorded,
    RecoveryStarted,
    RunCheckpointed,
)
from streams.core.journal import SendRequest, effects_of
from streams.core.journal.attempts import dispatch_intent
from tests.support.journal import (
    E_CLIENT,
    ENTRY_ID,
    NOTIFICATION_ID,
    PROTECTION_ID,
    RUN,
    SECOND,
    T0,
    World,
    dispatch,
    fold,
    reliable,
)


def at_c17() -> World:
    """09:00:00: C17 says entry is next; E1 contains the approved request; nothing sent."""
    world = World()
    world.history = [
        dispatch_intent(dispatch(), T0),
        RunCheckpointed(RUN, "C17", 17, 3, "{}", (ENTRY_ID,), T0),
    ]
    world.state = fold(world.history)
    return world


def to_lost_fill(world: World) -> None:
    """09:00:01 dispatch-start commits; 09:00:02 the venue fills O77, the answer is lost."""
    world.now = T0 + 1 * SECOND
    [attempt] = world.timers()
    assert isinstance(attempt, AttemptStarted) and attempt.attempted_at_ms == T0 + 1 * SECOND
    world.now = T0 + 2 * SECOND
    world.fault = lambda _: "lost"
    world.perform()
    assert world.venue.orders[0].venue_order_id == "O77"
    world.fault = reliable


def e1_sends(world: World) -> int:
    return sum(
        1
        for e in effects_of(world.history)
        if isinstance(e, SendRequest) and e.action_id == ENTRY_ID
    )


def test_lost_fill_is_recovered_by_lookup_and_c18_selects_p1() -> None:
    world = at_c17()
    to_lost_fill(world)
    world.now = T0 + 20 * SECOND
    world.crash()  # 09:00:20: a new owner restores the journal and recovers the run
    started, lookup = world.history[3:5]
    assert isinstance(started, RecoveryStarted)
    assert started.checkpoint_id == "C17"
    assert started.records_consulted == (f"AttemptStarted:{ENTRY_ID}#1",)
    assert started.routed_to_lookup == (ENTRY_ID,)
    assert isinstance(lookup, QueryRequested) and lookup.query == "order"
    assert lookup.client_order_id == E_CLIENT  # the original identity, not a new one
    assert not any(isinstance(e, SendRequest) for e in effects_of(world.history[3:]))

    world.now = T0 + 22 * SECOND
    world.perform()
    world.deliver()
    receipt, c18, recovered = world.history[5:8]
    assert isinstance(receipt, ReceiptRecorded)
    assert (receipt.outcome, receipt.venue_order_id, receipt.source) == (
        "filled",
        "O77",
        "reconciliation",
    )
    assert receipt.observed_at_ms == T0 + 22 * SECOND
    assert isinstance(c18, RunCheckpointed) and c18.checkpoint_id == "C18"
    assert c18.next_tasks == (PROTECTION_ID,)
    assert orjson.loads(c18.completed_json)[ENTRY_ID]["venue_order_id"] == "O77"
    assert isinstance(recovered, RecoveryReceiptRecorded)
    assert recovered.checkpoint_id == "C17" and recovered.checkpoint_advanced_to == "C18"
    assert recovered.records_consulted == (f"AttemptStarted:{ENTRY_ID}#1",)
    assert recovered.next_permitted == (PROTECTION_ID,)
    [evidence] = orjson.loads(recovered.evidence_json)
    assert evidence["venue_order_id"] == "O77"
    assert evidence["observed_at_ms"] == T0 + 22 * SECOND
    # The protection path checks the actual exposure before anything is intended.
    assert isinstance(world.history[8], QueryRequested) and world.history[8].query == "exposure"

    world.settle()
    assert e1_sends(world) == 1 and world.venue.accepted[E_CLIENT] == 1
    assert [world.status(a) for a in (ENTRY_ID, PROTECTION_ID, NOTIFICATION_ID)] == [
        "filled",
        "acknowledged",
        "acknowledged",
    ]


def test_send_answered_unknown_is_reconciled_without_a_crash() -> None:
    world = at_c17()
    world.now = T0 + 1 * SECOND
    world.timers()
    world.now = T0 + 2 * SECOND
    world.fault = lambda _: "unknown"
    world.perform()
    world.deliver()
    unknown, lookup = world.history[3:5]
    assert isinstance(unknown, ReceiptRecorded) and unknown.outcome == "unknown"
    assert unknown.source == "send_response"
    assert isinstance(lookup, QueryRequested) and lookup.reason == "unknown_answer"
    world.settle()
    assert e1_sends(world) == 1 and world.venue.accepted[E_CLIENT] == 1
    c18 = [e for e in world.of(RunCheckpointed) if e.checkpoint_id == "C18"]
    assert len(c18) == 1 and c18[0].next_tasks == (PROTECTION_ID,)


def test_second_crash_after_the_receipt_and_before_c18_sends_e1_once() -> None:
    world = at_c17()
    to_lost_fill(world)
    world.now = T0 + 20 * SECOND
    world.crash()
    world.now = T0 + 22 * SECOND
    world.perform()
    world.deliver()
    receipt_at = next(i for i, e in enumerate(world.history) if isinstance(e, ReceiptRecorded))
    # The receipt committed; the process dies before C18 (and before any later effect).
    world.now = T0 + 40 * SECOND
    world.crash(keep=receipt_at + 1)
    assert world.state is not None
    c18 = [e for e in world.of(RunCheckpointed) if e.checkpoint_id == "C18"]
    assert len(c18) == 1 and c18[0].next_tasks == (PROTECTION_ID,)
    # The open recovery of the dead owner completes from the journal: no second lookup.
    [receipt] = world.of(RecoveryReceiptRecorded)
    assert receipt.recovery_id == f"{RUN}.R1" and receipt.checkpoint_advanced_to == "C18"
    assert len(world.of(RecoveryStarted)) == 1
    world.settle()
    assert e1_sends(world) == 1 and world.venue.accepted[E_CLIENT] == 1
    assert [c.checkpoint_id for c in world.of(RunCheckpointed)] == ["C17", "C18", "C19", "C20"]


def test_no_answer_at_all_then_restore_without_recover_run() -> None:
    # The shell restores the partition and only the timers run: the missing answer becomes
    # a lookup, never a second submission.
    world = at_c17()
    to_lost_fill(world)
    world.now = T0 + 20 * SECOND
    world.crash(recover=False)
    world.timers()
    assert isinstance(world.history[-1], QueryRequested)
    assert world.history[-1].reason == "no_answer"
    world.settle()
    assert e1_sends(world) == 1
    assert world.status(ENTRY_ID) == "filled"
