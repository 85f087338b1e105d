"""Typed errors of the pure decision core.

Everything the core raises on purpose is a :class:`CoreError`, so the engine can tell "the
input or the history is wrong" apart from its own bugs with one ``except``. Each subclass
says in its docstring what an operator should do about it.

The admission decisions themselves (:func:`streams.core.admission.decide`) do not raise for
bad *deliveries*: a delivery that cannot be admitted becomes a ``DeliveryRejected`` event.
Exceptions are reserved for bad configuration (:class:`WorkflowFileError`), values handed to
the parsing helpers (:class:`InvalidValue`), and histories that contradict themselves
(:class:`IllegalTransition`, :class:`InconsistentHistory`, :class:`StateFormatError`).
"""

from __future__ import annotations

from collections.abc import Iterable


class CoreError(Exception):
    """Root of every error raised on purpose by :mod:`streams.core`."""


class InvalidValue(CoreError, ValueError):
    """A duration, time or interval string could not be parsed.

    The message quotes the value and names the accepted forms. It is also a ``ValueError``
    so generic parsing code can catch it.
    """


class IllegalTransition(CoreError):
    """A lifecycle machine was asked to make a move its transition table forbids.

    Raised by :func:`streams.core.lifecycle.transition` and therefore by ``evolve`` when an
    event would, for example, relaunch a finished branch slot or move a completed run back to
    running. ``decide`` never emits such an event, so seeing this means the history (the
    topic or the changelog) was written by something else or is corrupted: stop the
    processor for that partition and inspect the events of the named run, do not skip.
    """

    def __init__(self, machine: str, from_state: str, to_state: str) -> None:
        self.machine = machine
        self.from_state = from_state
        self.to_state = to_state
        super().__init__(
            f"illegal {machine} transition {from_state} -> {to_state}; the event history "
            "contradicts itself: inspect the run's events before restarting"
        )


class InconsistentHistory(CoreError):
    """An event refers to a run or slot the state does not have, or repeats a one-off fact.

    Like :class:`IllegalTransition` this is never produced by ``decide``'s own output; it
    means the history was written by another producer or is corrupted. Inspect the events of
    the admission key named in the message.
    """


class StateFormatError(CoreError):
    """Stored aggregate state bytes could not be decoded.

    The changelog or local store holds bytes this build cannot read. Rebuild the local store
    from the changelog; if the changelog itself is unreadable, restore it from the event
    topics.
    """


class UnsupportedStateVersion(StateFormatError):
    """Stored state was written with a format version this build does not know.

    Usually a rollback to an older build after a newer one wrote state. Roll forward, or
    rebuild the state store from the event topics with this build.
    """

    def __init__(self, version: object) -> None:
        self.version = version
        super().__init__(
            f"state format version {version!r} is not supported by this build; roll forward "
            "or rebuild the state store from the event topics"
        )


class WorkflowFileError(CoreError):
    """A workflow file has one or more problems; nothing in it was applied.

    ``problems`` lists every problem found (not just the first), each naming the offending
    path, e.g. ``workflow[0].validity.window: "5x" is not a duration (use 250ms, 5s, 2m, 1h,
    7d)``. Fix them all and apply the file again.
    """

    def __init__(self, problems: Iterable[str]) -> None:
        self.problems: list[str] = list(problems)
        listing = "\n".join(f"  - {p}" for p in self.problems)
        count = len(self.problems)
        noun = "problem" if count == 1 else "problems"
        super().__init__(f"workflow file has {count} {noun}:\n{listing}")


class IdentityError(CoreError):
    """A delivery's occurrence identity (or its deadline, scope or content) cannot be derived.

    ``missing`` names required fields that are absent or empty; ``invalid`` names fields whose
    value cannot be read (e.g. a candle time that is not RFC 3339 or epoch milliseconds);
    ``details`` says what is wrong with each invalid field. The sender must fix its payload:
    Sluicegate never guesses an identity, because a guessed identity either merges distinct
    signals or splits one signal into several runs.
    """

    def __init__(
        self,
        missing: Iterable[str] = (),
        invalid: Iterable[str] = (),
        details: Iterable[str] = (),
    ) -> None:
        self.missing: tuple[str, ...] = tuple(missing)
        self.invalid: tuple[str, ...] = tuple(invalid)
        self.details: tuple[str, ...] = tuple(details)
        super().__init__(self.describe())

    def describe(self) -> str:
        """One line for ``DeliveryRejected.detail``: the missing and invalid fields."""
        parts: list[str] = []
        if self.missing:
            parts.append("missing fields: " + ", ".join(self.missing))
        if self.details:
            parts.append("invalid fields: " + "; ".join(self.details))
        elif self.invalid:
            parts.append("invalid fields: " + ", ".join(self.invalid))
        return "; ".join(parts) if parts else "identity could not be derived"
