"""How a payload field's value is read: the canonical form each field name gets.

Shared by :mod:`streams.core.identity` (which applies it) and :mod:`streams.core.workflow`
(which refuses a revision that would change it for an identity field), so the two can never
disagree about what changes an admission key.

* **time**: the name is ``time`` or ``timestamp``, ends with ``_open``, ``_close``, ``_time``
  or ``_at``, or is the workflow's ``validity.source_time`` field: read as an instant and
  written as epoch milliseconds;
* **interval**: the ``interval`` field: a candle interval in its one canonical spelling
  (``1``, ``1m`` and ``60s`` are ``1m``; ``60`` and ``1h`` are ``1h``; ``D`` and ``1d`` are
  ``1d``), or the text as given when it is not an interval;
* **lower** / **upper**: venue names (``venue``, ``exchange``) are case-folded to lower case
  and instrument names (``instrument``, ``symbol``, ``ticker``) to upper case, so
  ``BINANCE``/``binance`` and ``btcusdt``/``BTCUSDT`` are one venue and one instrument, and
  the conventional spellings keep their form. A workflow lists fields to keep as given in
  ``[workflow.identity] case_sensitive``;
* **text**: everything else (stripped; plain decimal numbers normalised).
"""

from __future__ import annotations

from collections.abc import Collection
from enum import StrEnum
from typing import Protocol

CANDLE_CLOSE = "candle_close"
"""``validity.source_time`` literal: the source time is ``candle_open + interval``."""
CANDLE_OPEN_FIELD = "candle_open"
INTERVAL_FIELD = "interval"

TIME_FIELD_SUFFIXES = ("_open", "_close", "_time", "_at")
TIME_FIELD_NAMES = frozenset({"time", "timestamp"})
LOWER_CASE_FIELDS = ("venue", "exchange")
"""Case-folded to lower case unless listed in ``identity.case_sensitive``."""
UPPER_CASE_FIELDS = ("instrument", "symbol", "ticker")
"""Case-folded to upper case unless listed in ``identity.case_sensitive``."""
CASE_FOLDED_FIELDS = LOWER_CASE_FIELDS + UPPER_CASE_FIELDS

CLOUDEVENTS = "cloudevents"
"""``identity.envelope`` value: occurrences arrive as CloudEvents 1.0, identified by the
event's ``source`` + ``id``; every field name is a context attribute (``time``, ``type``,
``subject``, an extension), ``data`` / ``data_base64``, or ``data.<member>``, one member of the
event's JSON ``data`` object. Attribute names have no ``.`` or ``_`` (CloudEvents names are
``a``-``z`` and ``0``-``9``), so the two kinds of name can never be confused."""
DATA_PREFIX = "data."


def member_name(name: str) -> str:
    """The name a CloudEvents field is read as: the member of ``data.<member>``, else itself.

    Its canonical form is chosen by that name, so ``data.instrument`` is folded to upper case
    and ``data.candle_open`` read as an instant, as ``instrument`` and ``candle_open`` are.
    """
    return name[len(DATA_PREFIX) :] if name.startswith(DATA_PREFIX) else name


class Kind(StrEnum):
    """The canonical form a field is read in (see the module docstring)."""

    TIME = "time"
    INTERVAL = "interval"
    LOWER = "lower"
    UPPER = "upper"
    TEXT = "text"

    def describe(self) -> str:
        return {
            Kind.TIME: "read as an instant",
            Kind.INTERVAL: "read as a candle interval",
            Kind.LOWER: "folded to lower case",
            Kind.UPPER: "folded to upper case",
            Kind.TEXT: "read as text, case kept",
        }[self]


def is_time_field(name: str, source_time_field: str) -> bool:
    """Whether ``name`` is read as an instant (see the module docstring for the rule)."""
    return (
        name in TIME_FIELD_NAMES or name.endswith(TIME_FIELD_SUFFIXES) or name == source_time_field
    )


def field_kind(name: str, source_time_field: str, case_sensitive: Collection[str]) -> Kind:
    """The canonical form of field ``name`` under a workflow with these settings."""
    if is_time_field(name, source_time_field):
        return Kind.TIME
    if name == INTERVAL_FIELD:
        return Kind.INTERVAL
    if name not in case_sensitive:
        if name in LOWER_CASE_FIELDS:
            return Kind.LOWER
        if name in UPPER_CASE_FIELDS:
            return Kind.UPPER
    return Kind.TEXT


class IdentityDefinition(Protocol):
    """What a workflow definition or revision says about its occurrence identity."""

    @property
    def identity_event_id_field(self) -> str | None: ...

    @property
    def identity_derived_fields(self) -> tuple[str, ...]: ...

    @property
    def identity_case_sensitive_fields(self) -> tuple[str, ...]: ...

    @property
    def validity_source_time(self) -> str: ...

    @property
    def identity_envelope(self) -> str | None: ...


def identity_changes(old: IdentityDefinition, new: IdentityDefinition) -> list[tuple[str, str]]:
    """``(setting, what)`` for everything that would make ``new`` key occurrences differently.

    Empty when every admission key ``old`` produces is produced by ``new`` too: the same
    envelope (a CloudEvents identity or none), the same event-id field, the same derived
    fields in the same order, each read in the same form.
    """
    changes: list[tuple[str, str]] = []
    if old.identity_envelope != new.identity_envelope:
        changes.append(
            (
                "identity.envelope",
                f"{old.identity_envelope or '(none)'} -> {new.identity_envelope or '(none)'}",
            )
        )
    if old.identity_event_id_field != new.identity_event_id_field:
        changes.append(
            (
                "identity.event_id",
                f"{old.identity_event_id_field or '(none)'} -> "
                f"{new.identity_event_id_field or '(none)'}",
            )
        )
    if old.identity_derived_fields != new.identity_derived_fields:
        changes.append(
            (
                "identity.derived",
                f"[{', '.join(old.identity_derived_fields)}] -> "
                f"[{', '.join(new.identity_derived_fields)}]",
            )
        )
        return changes
    for name in old.identity_derived_fields:
        before = field_kind(name, old.validity_source_time, old.identity_case_sensitive_fields)
        after = field_kind(name, new.validity_source_time, new.identity_case_sensitive_fields)
        if before is not after:
            setting = (
                "validity.source_time"
                if Kind.TIME in (before, after)
                else "identity.case_sensitive"
            )
            changes.append(
                (setting, f"{name} would be {after.describe()}, not {before.describe()}")
            )
    return changes
