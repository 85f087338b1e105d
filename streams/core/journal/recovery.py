"""Recovery: restore the checkpoint, consult the newer journal records, route each action.

A checkpoint records progress, not what the venue did: an action whose ``AttemptStarted``
is newer than the checkpoint (or has no receipt) is looked up by its client order id, never
submitted again because the checkpoint still names it as next. Routes:

=====================  =====================================================================
``lookup``             an attempt without a receipt (or still unknown): look it up
``verify_before_send`` unsent, but the journal was restored from an older point: look it up,
                       because the old journal may predate an attempt
``attempt_if_permitted``  unsent (live journal): re-check deadline and authorization, then
                       attempt or expire
``exposure_check``     a protection waiting for its sizing: ask for the exposure again
``held``               held: a fresh lookup is recorded as evidence; the hold stays until
                       ``ResolveHold`` or evidence that resolves it
``settled``            a receipt, an expiry or a closed hold: nothing is sent
=====================  =====================================================================

One recovery is open per run at a time: a second ``RecoverRun`` while one is open is a no-op
(the engine's partition ownership makes one gateway instance decide for a run; the open
recovery completes from the answers and timers whoever owns the partition now), except that
a request saying the journal was restored from an older point replaces a live one, because
its fence must apply.
"""

from __future__ import annotations

from dataclasses import dataclass

from schemas.commands import RecoverRun
from schemas.events import RecoveryStarted
from streams.core.journal.answers import AUTO_RESOLVED
from streams.core.journal.attempts import query
from streams.core.journal.batch import Batch
from streams.core.journal.lifecycle import ActionStatus, is_done
from streams.core.journal.model import LIVE_JOURNAL, JournalPolicy, RunJournal
from streams.core.journal.plan import plan_changed, plan_of

A = ActionStatus
LOOKUP, VERIFY, ATTEMPT, EXPOSURE, HELD, SETTLED = (
    "lookup",
    "verify_before_send",
    "attempt_if_permitted",
    "exposure_check",
    "held",
    "settled",
)
_ROUTE = {
    A.ATTEMPTED: LOOKUP,
    A.RECONCILING: LOOKUP,
    A.INTENDED: ATTEMPT,
    A.ABSENT: ATTEMPT,
    A.SIZING: EXPOSURE,
    A.HELD: HELD,
}


@dataclass(frozen=True)
class RecoveryPlan:
    """What a recovery of the run at ``now`` restores, consults and does for each action."""

    checkpoint_id: str | None
    records_consulted: tuple[str, ...]
    routes: tuple[tuple[str, str], ...]
    absence_not_before_ms: int | None

    @property
    def routed_to_lookup(self) -> tuple[str, ...]:
        """Actions whose outcome is established by lookup before the recovery completes."""
        return tuple(a for a, route in self.routes if route in (LOOKUP, VERIFY))


def recovery_plan(state: RunJournal, now: int, journal_origin: str = LIVE_JOURNAL) -> RecoveryPlan:
    """The recovery of ``state`` at ``now`` (pure; ``decide(RecoverRun)`` carries it out).

    ``journal_origin`` other than ``live``: "not found" proves nothing before
    ``now + recv window + clock uncertainty + quiet period`` (any attempt lost with the newer
    journal was made before now, and the venue may accept it up to a recv window later), and
    every unsent action is verified by lookup before it may be attempted.
    """
    fence = None
    primary = state.primary
    if journal_origin != LIVE_JOURNAL and primary is not None and primary.intent is not None:
        policy = JournalPolicy.of(primary.intent)
        fence = (
            now
            + policy.recv_window_ms
            + primary.intent.clock_uncertainty_ms
            + policy.quiet_period_ms
        )
    earlier = state.absence_not_before_ms
    if earlier is not None:
        fence = earlier if fence is None else max(fence, earlier)
    routes: list[tuple[str, str]] = []
    for action in state.actions:
        route = _ROUTE.get(action.status, SETTLED)
        if route == ATTEMPT and fence is not None:
            verified = action.verified_at_ms
            route = VERIFY if verified is None or verified < fence else ATTEMPT
        routes.append((action.action_id, route))
    checkpoint = state.checkpoint.checkpoint_id if state.checkpoint is not None else None
    return RecoveryPlan(checkpoint, state.since_checkpoint, tuple(routes), fence)


def needs_recovery(state: RunJournal) -> bool:
    """Whether a restored run has anything for a recovery to do (the shell's restore check):
    an action not settled (held ones excepted), a checkpoint behind the journal, or an open
    recovery."""
    plan = plan_of(state)
    if state.recovery is not None or plan_changed(state, plan) or plan.next_tasks:
        return True
    return any(not is_done(a.status) for a in state.actions)


def recover(batch: Batch, command: RecoverRun) -> None:
    """Start a recovery (see the module docstring for when a request is a no-op)."""
    state = batch.journal
    if state.primary is None:
        return
    live = command.journal_origin == LIVE_JOURNAL
    open_recovery = state.recovery
    if open_recovery is not None and (live or open_recovery.journal_origin != LIVE_JOURNAL):
        return
    plan = recovery_plan(state, batch.now, command.journal_origin)
    batch.emit(
        RecoveryStarted(
            run_id=state.run_id,
            recovery_id=f"{state.run_id}.R{state.recoveries + 1}",
            requested_by=command.requested_by,
            reason=command.reason,
            journal_origin=command.journal_origin,
            owner_instance=batch.owner.instance,
            owner_generation=batch.owner.generation,
            checkpoint_id=plan.checkpoint_id,
            records_consulted=plan.records_consulted,
            routed_to_lookup=plan.routed_to_lookup,
            absence_not_before_ms=plan.absence_not_before_ms,
            supersedes=open_recovery.recovery_id if open_recovery is not None else None,
            started_at_ms=batch.now,
        )
    )
    primary = state.primary
    assert primary.intent is not None
    for action_id, route in plan.routes:
        action = batch.journal.action(action_id)
        assert action is not None
        if route in (LOOKUP, VERIFY):
            assert action.intent is not None
            batch.emit(query(action.intent, action, "order", "recovery", batch.now))
        elif route == EXPOSURE:
            batch.emit(query(primary.intent, action, "exposure", "recovery", batch.now))
        elif route == HELD and action.hold is not None and action.hold.reason in AUTO_RESOLVED:
            intent = action.intent or primary.intent
            kind = "exposure" if action.held_from is A.SIZING else "order"
            batch.emit(query(intent, action, kind, "recovery", batch.now))
