"""Typed errors of the pure decision core.

Everything the core raises on purpose is a :class:`CoreError`, so the engine can tell "the
input or the history is wrong" apart from its own bugs with one ``except``; it is a
:class:`streams.errors.StreamsError`, the one root of the ``streams`` package. Each subclass
says in its docstring what an operator should do about it.

The admission decisions themselves (:func:`streams.core.admission.decide`) do not raise for
bad *deliveries*: a delivery that cannot be admitted becomes a ``DeliveryRejected`` event.
Exceptions are reserved for bad configuration (:class:`WorkflowFileError`,
:class:`IdentityChanged`), values handed to the parsing helpers (:class:`InvalidValue`), a
payload whose identity cannot be read (:class:`IdentityError`, which the front doors' intake
turns into a :class:`Refusal`), and histories that contradict themselves
(:class:`IllegalTransition`, :class:`InconsistentHistory`, :class:`StateFormatError`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from streams.core.reasons import REJECT_INVALID_FIELD, REJECT_MISSING_FIELDS
from streams.errors import StreamsError


class CoreError(StreamsError):
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


class IdentityChanged(CoreError):
    """A new definition would change a destination's occurrence identity; nothing was revised.

    The identity (``[workflow.identity]``, and whatever changes how an identity field is read)
    is fixed once applied: under another identity, copies of occurrences already admitted
    would become new occurrences, and deliveries keyed under the old one would be rejected as
    ``identity_mismatch``. ``fields`` names the settings that would change
    (``identity.derived``, ``identity.event_id``, ``identity.case_sensitive``,
    ``validity.source_time``). A new identity is a new subscription: apply the definition
    under another subscription name.
    """

    def __init__(self, destination: str, changes: Iterable[tuple[str, str]]) -> None:
        listed = list(changes)
        self.destination = destination
        self.fields: tuple[str, ...] = tuple(dict.fromkeys(setting for setting, _ in listed))
        self.changes: tuple[str, ...] = tuple(f"{setting}: {what}" for setting, what in listed)
        super().__init__(
            f"{destination}: the occurrence identity is fixed once applied, and this would "
            f"change it ({'; '.join(self.changes)}). Copies of admitted occurrences would "
            "become new runs and deliveries in flight would be rejected; a new identity is a "
            "new subscription: apply it under another subscription name"
        )


class FieldRole(StrEnum):
    """What the workflow reads a payload field for (the values are the strings shown)."""

    IDENTITY = "identity"
    SOURCE_TIME = "source_time"
    SCOPE = "scope"
    SEQUENCE = "sequence"
    IMMUTABLE = "immutable"
    SOURCE = "source"
    PAYLOAD = "payload"
    ATTRIBUTE = "attribute"


_LABEL = {
    FieldRole.IDENTITY: "identity field",
    FieldRole.SOURCE_TIME: "source-time field",
    FieldRole.SCOPE: "decision-scope field",
    FieldRole.SEQUENCE: "scope sequence field",
    FieldRole.IMMUTABLE: "immutable field",
    FieldRole.SOURCE: "source field",
    FieldRole.PAYLOAD: "payload",
    FieldRole.ATTRIBUTE: "CloudEvents attribute",
}
_NEEDED_FOR = {
    FieldRole.IDENTITY: "to identify the occurrence",
    FieldRole.SOURCE_TIME: "for the source time its deadline is computed from",
    FieldRole.SCOPE: "for its decision scope",
    FieldRole.SEQUENCE: "to order signals within the decision scope",
    FieldRole.IMMUTABLE: "as immutable content",
    FieldRole.SOURCE: "to name the sender of the occurrence (identity is per source)",
    FieldRole.PAYLOAD: "",
    FieldRole.ATTRIBUTE: "",
}


@dataclass(frozen=True)
class FieldProblem:
    """One field a delivery cannot be admitted with: which, what it is for, what is wrong.

    ``missing`` is true for an absent (or blank) required field; ``message`` then is just
    ``"missing"``. Front doors render these; :meth:`describe` is the log/detail form.
    """

    field: str
    role: FieldRole
    message: str
    missing: bool = False

    @property
    def label(self) -> str:
        """``"decision-scope field"`` and the like."""
        return _LABEL[self.role]

    def explain(self) -> str:
        """For the sender: ``missing: the workflow needs this field for its decision scope``."""
        if self.missing and self.role is FieldRole.ATTRIBUTE:
            return "missing: every CloudEvent has this attribute (CloudEvents 1.0)"
        if self.missing:
            return f"missing: the workflow needs this field {_NEEDED_FOR[self.role]}"
        return f"{self.message} ({self.label})"

    def describe(self) -> str:
        """For logs: ``decision-scope field account: missing``."""
        if self.role is FieldRole.PAYLOAD:
            return f"{self.field}: {self.message}"
        return f"{self.label} {self.field}: {self.message}"


@dataclass(frozen=True)
class Refusal:
    """Why a delivery cannot become a run: ``reason`` (a ``DeliveryRejected`` reason), the
    ``problems`` (each naming its field, its role and what is wrong) and ``detail``, one line
    for logs and ``DeliveryRejected.detail``.

    The front doors get one from :func:`streams.core.intake.intake` and refuse the delivery
    with it, producing nothing; the processor turns the same findings into
    ``DeliveryRejected``. The sender must fix the payload (or its clock).
    """

    reason: str
    problems: tuple[FieldProblem, ...]
    detail: str


class IdentityError(CoreError):
    """A delivery's identity, source time, scope, sequence or content cannot be read.

    ``problems`` lists *every* missing and invalid field with its role (the reader never
    stops at the first). The reason is ``missing_identity_fields`` when any required field
    is absent, else ``invalid_field``. The sender must fix its payload: Sluicegate never
    guesses an identity, because a guessed identity either merges distinct signals or splits
    one signal into several runs.
    """

    def __init__(self, problems: Iterable[FieldProblem]) -> None:
        listed = tuple(problems)
        reason = REJECT_MISSING_FIELDS if any(p.missing for p in listed) else REJECT_INVALID_FIELD
        self.refusal = Refusal(reason, listed, _describe(listed))
        super().__init__(self.refusal.detail)

    @property
    def reason(self) -> str:
        """``missing_identity_fields`` or ``invalid_field``."""
        return self.refusal.reason

    @property
    def problems(self) -> tuple[FieldProblem, ...]:
        """Every missing or unreadable field, in reading order."""
        return self.refusal.problems

    def describe(self) -> str:
        """One line for logs and ``DeliveryRejected.detail``."""
        return self.refusal.detail

    @property
    def missing(self) -> tuple[str, ...]:
        """Names of the required fields that are absent or blank, in reading order."""
        return tuple(p.field for p in self.problems if p.missing)

    @property
    def invalid(self) -> tuple[str, ...]:
        """Names of the fields whose value cannot be read, in reading order."""
        return tuple(p.field for p in self.problems if not p.missing)


def _describe(problems: tuple[FieldProblem, ...]) -> str:
    """``missing fields: venue, account (account: decision-scope field); invalid fields: ...``."""
    parts: list[str] = []
    missing = [p for p in problems if p.missing]
    invalid = [p for p in problems if not p.missing]
    if missing:
        text = "missing fields: " + ", ".join(p.field for p in missing)
        others = [f"{p.field}: {p.label}" for p in missing if p.role is not FieldRole.IDENTITY]
        parts.append(text + (f" ({', '.join(others)})" if others else ""))
    if invalid:
        parts.append(
            "invalid fields: "
            + "; ".join(
                f"{p.field}: {p.message}"
                + ("" if p.role is FieldRole.IDENTITY else f" [{p.label}]")
                for p in invalid
            )
        )
    return "; ".join(parts) if parts else "identity could not be derived"
