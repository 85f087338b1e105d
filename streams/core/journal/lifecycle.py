"""The lifecycle machine of one journalled action.

Every action (entry, exit, protection, notification) has its own journal entry and moves only
along :data:`ACTION_TRANSITIONS`. ``ACTION.transition`` (:data:`ACTION` is one
:class:`~streams.core.lifecycle.Machine`) is the only way the journal core moves a status, so
an impossible history (a receipt for an action never attempted, an attempt after an expiry)
raises :class:`~streams.core.errors.IllegalTransition` in ``evolve``.

::

    (new) -QueryRequested(exposure)-> sizing -ExposureRecorded(0)-> not_needed
    (new) | sizing -ActionIntended-> intended -AttemptStarted-> attempted
    attempted -ReceiptRecorded-> acknowledged | filled | rejected | reconciling | absent
    reconciling -ReceiptRecorded-> acknowledged | filled | rejected | absent | reconciling
    absent -AttemptStarted-> attempted (same client order id)      absent | intended -> expired
    any unsettled state -ActionHeld-> held -HoldResolved-> reconciling | sizing | absent | closed
    filled | rejected | acknowledged | expired | closed -ActionHeld(conflicting_evidence)-> held

The gate's dispatch and the journal's intent are one state here: the journal's first record of
an entry or exit is its ``ActionIntended``, written when the gate's dispatch is accepted.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from streams.core.lifecycle import Machine


class ActionStatus(StrEnum):
    """Status of one action's journal entry (the values are used in checkpoints)."""

    SIZING = "sizing"
    """A protection waiting for the venue's exposure report (no intent yet)."""
    NOT_NEEDED = "not_needed"
    """A protection whose entry left no exposure: nothing to protect."""
    INTENDED = "intended"
    """The authorized intent is recorded; nothing was attempted."""
    ATTEMPTED = "attempted"
    """Dispatch-start committed and no receipt: possibly effective."""
    RECONCILING = "reconciling"
    """Outcome unknown: looked up by client order id, never sent again."""
    ACKNOWLEDGED = "acknowledged"
    """The venue accepted the order (open; may have executions)."""
    FILLED = "filled"
    """Executions recorded; done."""
    REJECTED = "rejected"
    """The venue refused it; nothing is live."""
    ABSENT = "absent"
    """The latest attempt is proven never to have taken effect."""
    HELD = "held"
    """Needs an operator (or later evidence); nothing is sent."""
    EXPIRED = "expired"
    """Never effective and will never be sent: deadline or authorization lapsed."""
    CLOSED = "closed"
    """An operator closed the hold without further sends."""


A = ActionStatus

_EVIDENCE = frozenset({A.ACKNOWLEDGED, A.FILLED, A.REJECTED, A.ABSENT})

ACTION_TRANSITIONS: Mapping[ActionStatus, frozenset[ActionStatus]] = {
    A.SIZING: frozenset({A.SIZING, A.INTENDED, A.NOT_NEEDED, A.HELD}),
    A.NOT_NEEDED: frozenset(),
    # intended -> reconciling: verified by lookup before the first attempt, because the
    # journal was restored from an older point (it may predate an attempt).
    A.INTENDED: frozenset({A.ATTEMPTED, A.EXPIRED, A.RECONCILING, A.HELD}),
    A.ATTEMPTED: _EVIDENCE | {A.RECONCILING, A.HELD},
    A.RECONCILING: _EVIDENCE | {A.RECONCILING, A.HELD},
    # Later receipts of an accepted order: more executions, the fill, a cancellation.
    A.ACKNOWLEDGED: frozenset({A.ACKNOWLEDGED, A.FILLED, A.REJECTED, A.HELD}),
    A.FILLED: frozenset({A.HELD}),
    A.REJECTED: frozenset({A.HELD}),
    A.ABSENT: frozenset({A.ATTEMPTED, A.EXPIRED, A.RECONCILING, A.HELD}),
    # held -> held: a fresh lookup of a held action keeps it held until evidence arrives.
    A.HELD: frozenset({A.HELD, A.RECONCILING, A.SIZING, A.ABSENT, A.CLOSED}),
    A.EXPIRED: frozenset({A.HELD}),
    A.CLOSED: frozenset({A.HELD}),
}
"""Allowed moves: ``ACTION_TRANSITIONS[from]`` is the set of legal targets. Settled actions
(filled, rejected, expired, closed) move only to held, when later evidence contradicts them;
``not_needed`` never moves."""

SETTLED = frozenset({A.ACKNOWLEDGED, A.FILLED, A.REJECTED, A.EXPIRED, A.CLOSED, A.NOT_NEEDED})
"""Nothing more will be sent for an action in these states."""

AWAITING_EVIDENCE = frozenset({A.ATTEMPTED, A.RECONCILING, A.SIZING})
"""The action waits for an answer from the venue (a send answer, a lookup, an exposure)."""

UNRESOLVED_ATTEMPT = frozenset({A.ATTEMPTED, A.RECONCILING})
"""An attempt exists whose outcome is not established: it may be live at the venue."""

ACTION: Machine[ActionStatus] = Machine(
    "action", ACTION_TRANSITIONS, frozenset({A.NOT_NEEDED}), frozenset({A.INTENDED, A.SIZING})
)
"""The action machine. An action the journal has no entry for yet may only begin as
``intended`` or (a protection) ``sizing``; only ``not_needed`` never moves (every settled
status may still become held when later evidence contradicts it)."""


def is_done(status: ActionStatus) -> bool:
    """Whether the run's plan may move past an action: settled, or held for an operator."""
    return status in SETTLED or status is A.HELD
