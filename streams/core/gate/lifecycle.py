"""The candidate machine: every candidate the gate decides moves through it exactly once.

``proposed`` is where every candidate starts (its proposal reached the gate, nothing is
decided yet). From there it is accepted (``pending``: the current generation of its kind,
waiting for its dispatch request) or it ends at once: ``superseded`` (an equal or newer
generation is current) or ``rejected`` (it cannot be ordered or sent as proposed). A
``pending`` candidate ends ``dispatched``, ``superseded`` (a newer generation was accepted)
or ``expired`` (its deadline passed first). Terminal statuses never move: that is what makes
"expired work ends once" and "dispatched once" a property of the table, not of care.

:func:`transition` is the only way the gate moves a status, so an impossible history (a
dispatched candidate expired, an expired one dispatched) raises
:class:`~streams.core.errors.IllegalTransition` instead of being absorbed. The machine is
separate from the run and slot machines in :mod:`streams.core.lifecycle` on purpose: their
``transition`` is typed to those two enums and is left as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from streams.core.errors import IllegalTransition


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
        {CandidateStatus.DISPATCHED, CandidateStatus.SUPERSEDED, CandidateStatus.EXPIRED}
    ),
    CandidateStatus.DISPATCHED: frozenset(),
    CandidateStatus.SUPERSEDED: frozenset(),
    CandidateStatus.EXPIRED: frozenset(),
    CandidateStatus.REJECTED: frozenset(),
}
"""Allowed moves: ``CANDIDATE_TRANSITIONS[from]`` is the set of legal targets."""


def transition(current: CandidateStatus, target: CandidateStatus) -> CandidateStatus:
    """Return ``target`` if ``current -> target`` is allowed, else raise IllegalTransition."""
    if target not in CANDIDATE_TRANSITIONS[current]:
        raise IllegalTransition("candidate", current.value, target.value)
    return target


def is_terminal(status: CandidateStatus) -> bool:
    """Whether a candidate has its one outcome and can never move again."""
    return status in TERMINAL
