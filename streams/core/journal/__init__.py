"""The action journal: the execution gateway's pure core (one state per run).

Public surface:

* ``decide(state, command, now, owner) -> list[JournalEvent]`` and
  ``evolve(state, event) -> RunJournal | None``, like every core (``None``: evicted);
* ``next_due_ms(state, retention_ms)`` for the engine's timers (``CheckTimers``);
* ``effects_of(events) -> list[EffectRequest]``: what the shell performs after the
  transaction holding ``events`` committed (``SendRequest``, ``LookupRequest``,
  ``ExposureRequest``), answered with ``VenueAnswered``, ``LookupAnswered`` and
  ``ExposureObserved``;
* ``recovery_plan(state, now, journal_origin)`` and ``needs_recovery(state)``: what a
  recovery would restore, consult and do, without doing it;
* ``state_codec.encode_state`` / ``decode_state``: bytes for the changelog.

Guarantees (each has a test in ``tests/unit/test_journal_*.py``):

* Nothing is sent without a committed ``AttemptStarted``, and an attempt is decided only
  after re-checking the deadline (``now + clock_uncertainty < expires_at``) and the
  authorization; a lapsed unsent action is ``ActionExpired``.
* An attempt whose outcome is unknown (answered unknown, unanswered, or found without a
  receipt by recovery) is looked up by its client order id and never submitted again until
  its absence is proven: "not found" counts only for a lookup sent at or after
  ``attempt time + recv window + clock uncertainty + quiet period``. Proven absence allows
  one new attempt under the *same* client order id, if the deadline and authorization still
  allow it; otherwise the action expires. An attempt still unknown after the reconciliation
  budget is held (owner, reason, since) until ``ResolveHold`` or evidence.
* Entry, protection and notification are separate actions: a protection is intended only
  once the entry's receipt shows exposure, sized from the venue's exposure report; a failed
  notification or protection never repeats anything before it.
* One step per decision: a command records only what it establishes (an intent, a receipt,
  a hold, a recovery's start); the checkpoint's advance, a recovery's receipt and the next
  task's start (its intent, later its attempt) are later ``CheckTimers`` decisions, due at
  once. So intent, dispatch-start, receipt, checkpoint advance and the next action's intent
  are each committed in a transaction of their own, and a crash can fall between any two.
* The checkpoint advances after every change of the plan; recovery restores it, consults the
  newer journal records and follows the journal, not the checkpoint, into what comes next.
* A journal restored from an older point (``RecoverRun.journal_origin != "live"``) never
  treats "no attempt in my journal" as "nothing was sent": every action is looked up before
  it may be attempted, and "not found" counts only after the recovery's fence.
* One recovery is open per run; a second concurrent ``RecoverRun`` is a no-op.
* With a retention, a finished run (every action settled, nothing pending) is evicted once
  the retention (at least 2 h) has passed since its deadline and its last record, and a
  dispatch of a run without state read an hour or more after its send horizon is refused
  before anything is journalled (on the live journal), so an evicted run is never intended
  or sent again (:mod:`~streams.core.journal.retention`).
"""

from streams.core.journal.commands import AcceptDispatch, CheckTimers, Command
from streams.core.journal.decide import decide, next_due_ms
from streams.core.journal.effects import (
    EffectRequest,
    ExposureRequest,
    LookupRequest,
    SendRequest,
    effects_of,
)
from streams.core.journal.evolve import evolve
from streams.core.journal.lifecycle import ACTION_TRANSITIONS, ActionStatus
from streams.core.journal.model import (
    ActionState,
    JournalEvent,
    JournalPolicy,
    Owner,
    RunJournal,
    action_id_for,
    client_order_id_for,
)
from streams.core.journal.recovery import RecoveryPlan, needs_recovery, recovery_plan

__all__ = [
    "ACTION_TRANSITIONS",
    "AcceptDispatch",
    "ActionState",
    "ActionStatus",
    "CheckTimers",
    "Command",
    "EffectRequest",
    "ExposureRequest",
    "JournalEvent",
    "JournalPolicy",
    "LookupRequest",
    "Owner",
    "RecoveryPlan",
    "RunJournal",
    "SendRequest",
    "action_id_for",
    "client_order_id_for",
    "decide",
    "effects_of",
    "evolve",
    "needs_recovery",
    "next_due_ms",
    "recovery_plan",
]
