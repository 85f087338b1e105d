"""The supersession gate: one pure state per decision scope, decided in one place.

Admission writes ``CandidateProposed`` when a run's proposing slot proposes an action, and
``DispatchRequested`` once every approving slot completed, both to ``candidates`` keyed by
the scope key. The gate decides them on the scope's partition, so candidate acceptance and
dispatch admission for one scope are ordered by one decider and can never race:
``CandidateAccepted`` / ``CandidateSuperseded`` / ``CandidateExpired`` / ``CandidateRejected``
to ``gate-decisions`` and ``ActionDispatched`` to ``actions``. Public surface:
:func:`decide`, :func:`evolve`, :func:`next_due_ms`, the state (:class:`ScopeState`), the
commands and the codec; errors are the core's (:class:`IllegalTransition`,
:class:`InconsistentHistory`, :class:`StateFormatError`).

Rules
-----
1. **Generations, not arrival.** A candidate's generation is the scope's declared sequence
   value in canonical form, compared as a time or as a number (``Decimal``; never as text:
   ``"10"`` is newer than ``"9"``). Each action kind (``entry``, ``exit``, ...) has its own
   current generation in the scope.
2. **Newer supersedes older.** A candidate whose generation is newer than the current one of
   its kind is accepted and becomes current; the pending candidate it replaces is
   ``CandidateSuperseded(newer_generation)``, naming the new candidate and generation.
3. **Late and older loses at once.** A candidate older than the current generation is
   ``CandidateSuperseded(older_than_current)`` on arrival; arrival order never makes it win.
4. **Ties: the first accepted stays current.** A candidate whose generation equals the
   current one (another occurrence with the same sequence) is
   ``CandidateSuperseded(same_generation)``; of several equal generations only the first to
   reach the gate can ever be accepted, whatever else arrives in between.
5. **Exits keep their own policy.** A non-entry candidate is ordered only among candidates of
   its own kind, so a new entry never drops an exit. Its deadline at the gate is
   ``source_time + exit_window_ms`` when the workflow gives one, none otherwise. An entry
   is held to the run's authoritative ``expires_at_ms``.
6. **Dispatch only while current, pending and in time.** ``DispatchRequested`` produces
   ``ActionDispatched`` only if its candidate is the pending current candidate and
   ``now + clock_uncertainty < expires_at`` (equality fails), where ``expires_at`` is the
   earlier of the authoritative deadline and the request's copy and ``clock_uncertainty``
   the larger of the two allowances; otherwise ``CandidateExpired(expired_before_send)``.
   The commit of ``ActionDispatched`` is the final supersession cutoff: a candidate
   accepted after it cannot recall it. The gateway re-checks the deadline immediately
   before the request leaves.
7. **Early requests are held.** A request for a candidate the gate has not seen (it overtook
   its proposal, which one partition read in order does not do) is kept in the state
   (``DispatchRequested`` in ``decide``'s output means exactly that; it is routed nowhere)
   and applied, with its own deadline copy, when the proposal is accepted.
8. **Timers.** A pending candidate that is no longer eligible (``next_due_ms`` =
   ``expires_at - clock_uncertainty``) gets ``CandidateExpired(deadline_passed)`` once, as
   does a candidate that was already out of time when it was accepted.
9. **Outcomes end once.** Dispatched, superseded, expired and rejected are terminal
   (:mod:`streams.core.gate.lifecycle`). A later copy of a decided candidate's proposal or
   dispatch request produces no events: nothing is reopened, dispatched again or recorded
   twice. Decided ids are remembered at least an hour past the later of their deadline
   and their outcome (the 256 most recent per scope); the current candidate of each kind
   always. A copy arriving after its id was forgotten can still never be dispatched (its
   generation is not newer than the current one): it is answered as a late arrival.
10. **Withdrawn approvals end at once.** ``DispatchWithdrawn`` (an approving slot of the run
   failed or was skipped) ends the pending candidate ``CandidateRejected`` with the
   withdrawal's reason (``approval_failed`` / ``approval_skipped``) instead of letting it
   wait for its deadline (one already out of time ends ``CandidateExpired(deadline_passed)``,
   so expired work is counted as expired); a candidate that has its outcome keeps it.
11. **Bad proposals are rejected, not guessed.** An unreadable generation, a comparison kind
   other than the scope's, a negative allowance or window, a candidate id that is not
   ``<run_id>.<kind>``, or unusable order parameters give ``CandidateRejected``.

Nothing here reads a clock: ``now`` (epoch ms UTC) is passed in and recorded by every
decision.
"""

from streams.core.errors import (
    IllegalTransition,
    InconsistentHistory,
    StateFormatError,
    UnsupportedStateVersion,
)
from streams.core.gate.commands import (
    CheckTimers,
    Command,
    GateEvent,
    Outcome,
    ProposeCandidate,
    RequestDispatch,
    WithdrawDispatch,
)
from streams.core.gate.decide import decide, next_due_ms
from streams.core.gate.evolve import evolve
from streams.core.gate.lifecycle import CandidateStatus
from streams.core.gate.state import (
    Candidate,
    Decision,
    HeldRequest,
    ScopeState,
    Settled,
    Track,
)
from streams.core.gate.state_codec import decode_state, encode_state

__all__ = [
    "Candidate",
    "CandidateStatus",
    "CheckTimers",
    "Command",
    "Decision",
    "GateEvent",
    "HeldRequest",
    "IllegalTransition",
    "InconsistentHistory",
    "Outcome",
    "ProposeCandidate",
    "RequestDispatch",
    "ScopeState",
    "Settled",
    "StateFormatError",
    "Track",
    "UnsupportedStateVersion",
    "WithdrawDispatch",
    "decide",
    "decode_state",
    "encode_state",
    "evolve",
    "next_due_ms",
]
