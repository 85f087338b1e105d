"""Typed errors of the journal core (all :class:`~streams.core.errors.CoreError`).

Histories that contradict themselves raise the core's shared
:class:`~streams.core.errors.IllegalTransition` (machine ``"action"``) and
:class:`~streams.core.errors.InconsistentHistory`; bad *commands* never raise: an unusable
answer is ignored and an invalid dispatch is held for an operator.
"""

from __future__ import annotations

from streams.core.errors import CoreError


class InvalidPolicy(CoreError, ValueError):
    """A journal timing policy that could hold an attempt before absence can be proven, or
    has non-positive values. A configuration error: fix the gateway's settings."""
