"""Recovery: one owner, a receipt naming what it used, and journals restored from backups."""

from __future__ import annotations

import dataclasses

import orjson

from schemas.events import (
    AttemptStarted,
    QueryRequested,
    ReceiptRecorded,
    RecoveryReceiptRecorded,
    RecoveryStarted,
    RunCheckpointed,
)
from streams.core.journal import (
    SendRequest,
    effects_of,
    needs_recovery,
    recovery_plan,
)
from tests.support.journal import (
    E_CLIENT,
    ENTRY_ID,
    NOTIFICATION_ID,
    PROTECTION_ID,
    SECOND,
    T0,
    UNCERTAINTY,
    World,
    dispatch,
    fold,
    recover_run,
)


def lost_fill() -> World:
    """E1 attempted at T0, filled as O77 at the venue; the answer is lost."""
    world = World()
    world.decide(dispatch())
    world.fault = lambda _: "lost"
    world.perform()
    return world


def test_two_recover_run_commands_make_one_recovery_and_one_advance() -> None:
    world = lost_fill()
    world.now = T0 + 20 * SECOND
    world.crash(recover=False)
    first = world.decide(recover_run(world.now, request="rr-1"))
    second = world.decide(recover_run(world.now, request="rr-2"))  # concurrent: a no-op
    assert [type(e) for e in first] == [RecoveryStarted, QueryRequested]
    assert second == []
    world.settle()
    assert len(world.of(RecoveryStarted)) == 1 and len(world.of(RecoveryReceiptRecorded)) == 1
    advanced = [c for c in world.of(RunCheckpointed) if c.next_tasks == (PROTECTION_ID,)]
    assert len(advanced) == 1
    # A recovery after the first completed re-checks and changes nothing.
    checkpoints = len(world.of(RunCheckpointed))
    again = world.decide(recover_run(world.now, request="rr-3"))
    assert [type(e) for e in again] == [RecoveryStarted, RecoveryReceiptRecorded]
    assert len(world.of(RunCheckpointed)) == checkpoints
    assert world.venue.accepted[E_CLIENT] == 1


def test_recovery_evidence_is_a_new_observation_and_the_old_one_stays() -> None:
    world = World()
    world.decide(dispatch(limit_price="96000"))
    world.now = T0 + 1 * SECOND
    world.fault = lambda _: "unknown"
    world.perform()
    world.deliver()  # what the decision knew: "unknown" at 09:00:01
    world.now = T0 + 20 * SECOND
    world.crash()
    world.settle()
    [first] = [
        e for e in world.of(ReceiptRecorded) if e.source == "send_response" and e.slot == "entry"
    ]
    assert (first.outcome, first.observed_at_ms) == ("unknown", T0 + 1 * SECOND)
    [recovered] = world.of(RecoveryReceiptRecorded)
    [evidence] = orjson.loads(recovered.evidence_json)
    assert (evidence["outcome"], evidence["source"]) == ("filled", "reconciliation")
    assert evidence["queried_at_ms"] == T0 + 20 * SECOND
    intent = world.state.action(ENTRY_ID).intent  # type: ignore[union-attr]
    assert intent is not None and intent.limit_price == "96000" and intent.intended_at_ms == T0


def test_recovery_plan_routes_each_action() -> None:
    world = lost_fill()
    state = fold(world.history)
    assert state is not None and needs_recovery(state)
    plan = recovery_plan(state, T0 + 20 * SECOND)
    assert plan.checkpoint_id == "C1"
    assert plan.routes == ((ENTRY_ID, "lookup"),)
    assert plan.records_consulted == (f"AttemptStarted:{ENTRY_ID}#1",)
    backup = recovery_plan(state, T0 + 20 * SECOND, "backup")
    assert backup.absence_not_before_ms == T0 + 20 * SECOND + 5 * SECOND + UNCERTAINTY + 30 * SECOND
    world.fault = lambda _: "ok"
    world.settle()
    assert world.state is not None and not needs_recovery(world.state)


def test_backup_that_predates_the_attempt_does_not_prove_absence() -> None:
    world = lost_fill()  # O77 is filled at the venue ...
    world.now = T0 + 1_000 * SECOND
    world.crash(keep=2, origin="backup")  # ... but the restored journal stops before E1's attempt
    started = world.of(RecoveryStarted)[0]
    assert started.routed_to_lookup == (ENTRY_ID,) and started.absence_not_before_ms is not None
    assert isinstance(world.history[-1], QueryRequested)
    assert world.history[-1].reason == "recovery"
    assert not [e for e in effects_of(world.history[2:]) if isinstance(e, SendRequest)]
    world.settle()
    adopted = next(e for e in world.of(ReceiptRecorded) if e.action_id == ENTRY_ID)
    assert (adopted.outcome, adopted.venue_order_id, adopted.attempt) == ("filled", "O77", 0)
    assert world.venue.accepted[E_CLIENT] == 1
    # The protection intended after the restore is also looked up before its first send.
    p_queries = [e for e in world.of(QueryRequested) if e.action_id == PROTECTION_ID]
    assert p_queries[0].query == "exposure" and p_queries[1].reason == "verify_before_send"
    assert [world.status(a) for a in (ENTRY_ID, PROTECTION_ID, NOTIFICATION_ID)] == [
        "filled",
        "acknowledged",
        "acknowledged",
    ]
    assert all(n == 1 for n in world.venue.accepted.values())


def test_live_recovery_of_the_same_truncation_would_send_again() -> None:
    # Why the origin matters: the core cannot see that a journal is old. Told "live", a
    # journal without the attempt is the whole truth, and the venue accepts a second order
    # once the first is no longer open. The guard is the operator's (or shell's) origin flag.
    world = lost_fill()
    world.now = T0 + 1_000 * SECOND
    world.effect_floor = 0  # a backup restore, misreported as the live journal
    world.crash(keep=2, origin="live")
    assert any(isinstance(e, AttemptStarted) for e in world.history[2:])


def test_backup_where_nothing_was_sent_attempts_after_the_fence() -> None:
    world = World()
    world.decide(dispatch())
    world.effects.clear()  # the attempt never left
    world.now = T0 + 10 * SECOND
    world.crash(keep=2, origin="backup")
    fence = world.of(RecoveryStarted)[0].absence_not_before_ms
    assert fence is not None
    world.settle()
    [attempt] = [e for e in world.of(AttemptStarted) if e.action_id == ENTRY_ID]
    assert attempt.attempted_at_ms >= fence
    assert world.venue.accepted[E_CLIENT] == 1 and world.status(ENTRY_ID) == "filled"


def test_backup_request_replaces_an_open_live_recovery() -> None:
    world = lost_fill()
    world.now = T0 + 20 * SECOND
    world.crash()  # a live recovery is open
    world.decide(recover_run(world.now, origin="backup", request="rr-2"))
    live, backup = world.of(RecoveryStarted)
    assert backup.supersedes == live.recovery_id and backup.absence_not_before_ms is not None
    assert world.decide(recover_run(world.now, origin="backup", request="rr-3")) == []
    world.settle()
    [receipt] = world.of(RecoveryReceiptRecorded)
    assert receipt.recovery_id == backup.recovery_id
    assert world.venue.accepted[E_CLIENT] == 1


def test_recover_run_for_an_unknown_run_is_a_no_op() -> None:
    world = World()
    assert world.decide(recover_run(T0)) == []
    world.decide(dispatch())
    other = dataclasses.replace(recover_run(T0), run_id="run-" + "0" * 24)
    assert world.decide(other) == []
