"""What the gate keeps for one decision scope, and the limits that keep it small.

One :class:`ScopeState` per scope key. Per action kind a :class:`Track` holds the current
generation, the candidate that holds it and, while that candidate waits for its dispatch
request, the candidate itself (:class:`Candidate`). Only the current candidate of a kind can
be pending (accepting a newer one supersedes it in the same step), so the pending set is at
most one candidate per kind.

Everything else is bounded memory:

* ``settled`` - candidate ids that reached their outcome, so that a later copy of their
  proposal or dispatch request is recognised and answered with nothing. An entry is kept
  until ``SETTLED_MEMORY_MS`` after the later of its deadline and its decision, and at most
  the ``SETTLED_LIMIT`` most recent ones are kept.
* ``held`` - dispatch requests that reached the gate before their proposal (see
  :mod:`streams.core.gate.decide`), kept under the same rule with ``HELD_LIMIT``.
* ``recent`` - the last ``RECENT_LIMIT`` decisions, for ``sluicegate scopes show``.

The current generation of each kind is never forgotten: it is what keeps a late, older
source event (or a copy of a forgotten candidate) from ever being accepted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from streams.core.gate.lifecycle import CandidateStatus

SETTLED_MEMORY_MS = 3_600_000
"""How long past the later of its deadline and its outcome a settled id is remembered (1 h)."""
SETTLED_LIMIT = 256
"""At most this many settled ids per scope (the most recent outcomes)."""
HELD_LIMIT = 64
"""At most this many dispatch requests waiting for their proposal per scope."""
RECENT_LIMIT = 20
"""Decisions kept per scope for display."""


@dataclass(frozen=True)
class Candidate:
    """An accepted candidate waiting for its dispatch request (everything it is sent with).

    ``expires_at_ms`` is the deadline the gate holds it to (``None``: a non-entry action
    without a window); the other fields are those of its ``CandidateProposed``.
    """

    candidate_id: str
    run_id: str
    admission_key: str
    subscription: str
    environment: str
    kind: str
    side: str
    quantity: str | None
    notional: str | None
    limit_price: str | None
    max_slippage_bps: str | None
    params_json: str
    protection_json: str | None
    notification_json: str | None
    reassessment_of: str | None
    venue: str | None
    instrument: str | None
    account: str | None
    generation: str
    generation_kind: str
    expires_at_ms: int | None
    source_time_ms: int
    validity_source_time: str
    validity_window_ms: int
    clock_uncertainty_ms: int
    workflow_revision: int
    exit_window_ms: int | None
    enqueued_at_ms: int
    dequeued_at_ms: int | None
    proposed_at_ms: int
    accepted_at_ms: int

    def due_ms(self) -> int | None:
        """First instant at which it is no longer eligible (``None``: never)."""
        if self.expires_at_ms is None:
            return None
        return self.expires_at_ms - self.clock_uncertainty_ms


@dataclass(frozen=True)
class Track:
    """The current generation of one action kind in the scope.

    ``candidate_id`` holds ``generation``; ``pending`` is that candidate while it waits for
    its dispatch request, ``None`` once it has its outcome.
    """

    kind: str
    generation: str
    generation_kind: str
    candidate_id: str
    pending: Candidate | None


class Settled(NamedTuple):
    """A candidate id with its outcome, remembered until ``forget_at_ms``.

    A named tuple rather than a frozen dataclass: a scope holds up to ``SETTLED_LIMIT`` of
    them and the state is decoded for every record, so construction cost matters.
    """

    candidate_id: str
    status: CandidateStatus
    forget_at_ms: int


@dataclass(frozen=True)
class HeldRequest:
    """A dispatch request whose proposal has not reached the gate yet."""

    candidate_id: str
    approvals: tuple[str, ...]
    expires_at_ms: int | None
    clock_uncertainty_ms: int
    requested_at_ms: int
    forget_at_ms: int


class Decision(NamedTuple):
    """One gate decision, as ``sluicegate scopes show`` lists it."""

    candidate_id: str
    kind: str
    outcome: str
    reason: str | None
    generation: str
    decided_at_ms: int


@dataclass(frozen=True)
class ScopeState:
    """Everything the gate keeps for one decision scope (tracks sorted by kind)."""

    scope_key: str
    tracks: tuple[Track, ...]
    settled: tuple[Settled, ...]
    held: tuple[HeldRequest, ...]
    recent: tuple[Decision, ...]

    def track(self, kind: str) -> Track | None:
        """The track of ``kind``, or ``None`` if no candidate of that kind was accepted."""
        for track in self.tracks:
            if track.kind == kind:
                return track
        return None

    def pending(self) -> tuple[Candidate, ...]:
        """Candidates waiting for their dispatch request (at most one per kind)."""
        return tuple(t.pending for t in self.tracks if t.pending is not None)

    def settled_status(self, candidate_id: str) -> CandidateStatus | None:
        """The remembered outcome of ``candidate_id``, or ``None``."""
        for entry in self.settled:
            if entry.candidate_id == candidate_id:
                return entry.status
        return None

    def held_request(self, candidate_id: str) -> HeldRequest | None:
        """The held dispatch request of ``candidate_id``, or ``None``."""
        for held in self.held:
            if held.candidate_id == candidate_id:
                return held
        return None

    def knows(self, candidate_id: str) -> bool:
        """Whether ``candidate_id`` was decided here (current, pending or remembered)."""
        return self.settled_status(candidate_id) is not None or any(
            t.candidate_id == candidate_id for t in self.tracks
        )


def empty_state(scope_key: str) -> ScopeState:
    """The state of a scope the gate has decided nothing for."""
    return ScopeState(scope_key, (), (), (), ())
