"""What the gate is asked to decide, and what it answers with.

Commands wrap the gate's inputs from the ``candidates`` topic; :data:`GateEvent` is every
event :func:`~streams.core.gate.decide.decide` can return. ``DispatchRequested`` appears in
the output only when the gate *holds* a request whose proposal has not arrived: the
application keeps it in the state (changelog) and routes it nowhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from schemas.events import (
    ActionDispatched,
    CandidateAccepted,
    CandidateExpired,
    CandidateProposed,
    CandidateRejected,
    CandidateSuperseded,
    DispatchRequested,
    DispatchWithdrawn,
)


@dataclass(frozen=True)
class ProposeCandidate:
    """Order a proposed candidate in its scope."""

    proposal: CandidateProposed


@dataclass(frozen=True)
class RequestDispatch:
    """Admit a candidate's dispatch if it is still current, pending and within its deadline."""

    request: DispatchRequested


@dataclass(frozen=True)
class WithdrawDispatch:
    """End a pending candidate whose approval failed or was skipped (``CandidateRejected``)."""

    withdrawal: DispatchWithdrawn


@dataclass(frozen=True)
class CheckTimers:
    """Expire every pending candidate whose deadline has passed at ``now``."""


Command: TypeAlias = ProposeCandidate | RequestDispatch | WithdrawDispatch | CheckTimers

Outcome: TypeAlias = (
    CandidateAccepted
    | CandidateSuperseded
    | CandidateExpired
    | CandidateRejected
    | ActionDispatched
)
"""The gate's decisions (``gate-decisions``; ``ActionDispatched`` goes to ``actions``)."""

GateEvent: TypeAlias = Outcome | DispatchRequested
"""Everything ``decide`` returns; ``DispatchRequested`` means "held", state only."""
