"""The candidate machine: every candidate the gate decides moves through it exactly once.

``proposed`` is where every candidate starts (its proposal reached the gate, nothing is
decided yet). From there it is accepted (``pending``: the current generation of its kind,
waiting for its dispatch request) or it ends at once: ``superseded`` (an equal or newer
generation is current) or ``rejected`` (it cannot be ordered or sent as proposed). A
``pending`` candidate ends ``dispatched``, ``superseded`` (a newer generation was accepted),
``expired`` (its deadline passed first) or ``rejected`` (its run withdrew it: an approving
slot failed or was skipped). Terminal statuses never move: that is what makes
"expired work ends once" and "dispatched once" a property of the table, not of care.

:data:`CANDIDATE` is one :class:`~streams.core.lifecycle.Machine`; its ``transition`` is the
only way the gate moves a status, so an impossible history (a dispatched candidate expired, an
expired one dispatched) raises :class:`~streams.core.errors.IllegalTransition` instead of
being absorbed.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from streams.core.lifecycle import Machine


class CandidateStatus(StrEnum):
    """Status of one candidate at the gate (the values are the strings used on the wire)."""

    PROPOSED = "proposed"
    PENDING = "pending"
    DISPATCHED = "dispatched"
    SUPERSEDED = "superseded"
    EXPIRED = "expired"
    REJECTED = "rejected"


TERMINAL: frozenset[CandidateStatus] = frozenset(
    {
        CandidateStatus.DISPATCHED,
        CandidateStatus.SUPERSEDED,
        CandidateStatus.EXPIRED,
        CandidateStatus.REJECTED,
    }
)
"""Statuses a candidate never leaves; each candidate reaches exactly one of them at most."""

CANDIDATE_TRANSITIONS: Mapping[CandidateStatus, frozenset[CandidateStatus]] = {
    CandidateStatus.PROPOSED: frozenset(
        {CandidateStatus.PENDING, CandidateStatus.SUPERSEDED, CandidateStatus.REJECTED}
    ),
    CandidateStatus.PENDING: frozenset(
        {
            CandidateStatus.DISPATCHED,
            CandidateStatus.SUPERSEDED,
            CandidateStatus.EXPIRED,
            CandidateStatus.REJECTED,
        }
    ),
    CandidateStatus.DISPATCHED: frozenset(),
    CandidateStatus.SUPERSEDED: frozenset(),
    CandidateStatus.EXPIRED: frozenset(),
    CandidateStatus.REJECTED: frozenset(),
}
"""Allowed moves: ``CANDIDATE_TRANSITIONS[from]`` is the set of legal targets."""

CANDIDATE: Machine[CandidateStatus] = Machine("candidate", CANDIDATE_TRANSITIONS, TERMINAL)
"""The candidate machine (every candidate begins ``proposed``)."""
