"""Occurrence identity: which deliveries are copies of the same upstream occurrence.

Used by both the ingest front door (to key the delivery) and the processor (to check the key
and admit), so everything here is a pure, deterministic function of ``(workflow revision,
payload)``. Arrival time, delivery ids and payload hashes never enter an identity: a retry's
arrival time changes, and identical payloads can be separate scheduled occurrences.

Canonical values
----------------
Every field value is reduced to one canonical string before it is compared or hashed:

* absent keys, ``null`` and blank strings are *missing*;
* strings are stripped of surrounding whitespace (case is kept: venues differ on it);
* numbers, and strings that are plain decimal numbers, are rendered as a normalized decimal:
  ``97000.50``, ``"97000.50"`` and ``97000.5`` all become ``"97000.5"``; ``"1e3"`` becomes
  ``"1000"``. Strings with leading zeros (``"007"``) are identifiers, not numbers, and are
  kept as written so they cannot collide with ``"7"``;
* booleans become ``"true"``/``"false"``;
* *time fields* become decimal epoch milliseconds, so an RFC 3339 copy and an epoch-ms copy of
  the same candle agree. A field is a time field when its name is ``time`` or ``timestamp``,
  ends with ``_open``, ``_close``, ``_time`` or ``_at``, or is the workflow's
  ``validity_source_time`` field;
* arrays and objects are refused in identity, scope and sequence fields; in immutable fields
  they are kept as canonical JSON (sorted keys).

The event-id value is opaque: it is stripped but never read as a number or a time.

Admission key
-------------
``<subscription>/<environment>/<source>/e:<event id>`` when the workflow declares an
``event_id`` field and the payload carries a non-blank value there, otherwise
``<subscription>/<environment>/<source>/d:<v1>|<v2>|...`` with the canonical values of the
derived fields in declared order. Every component is percent-encoded with
``urllib.parse.quote(safe="")``, so ``/``, ``|`` and ``:`` inside values cannot make two
different identities spell the same key, while plain values stay readable:
``btc-breakout/paper/tradingview/d:binance|BTCUSDT|1m|1796040000000|breakout-v1``.
A delivery whose identity cannot be derived is keyed by :func:`rejection_key`
(``<subscription>/<environment>/!<delivery id>``); ``!`` never starts an encoded source, so
the two forms cannot collide.

Content digest
--------------
SHA-256 hex over the canonical JSON of ``{"immutable": {field: value or null},
"source_time_ms": ms}``. The source time is part of it so that two copies disagreeing about
the source time conflict, instead of the later one silently stretching the deadline.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Context, Decimal, InvalidOperation
from urllib.parse import quote

import orjson

from schemas.events import WorkflowRevised
from streams.core.durations import parse_interval, parse_time
from streams.core.errors import IdentityError, InvalidValue
from streams.core.workflow import CANDLE_CLOSE, CANDLE_OPEN_FIELD, INTERVAL_FIELD

UNKNOWN_SOURCE = "unknown"
"""``source`` used when the payload has none."""
EVENT_ID_IDENTITY = "event_id"
"""Name under which an event-id identity appears in ``Occurrence.identity_fields``."""
SOURCE_TIME = "source_time"
"""Name reported in ``differing_fields`` when copies disagree about the source time."""

TIME_FIELD_SUFFIXES = ("_open", "_close", "_time", "_at")
TIME_FIELD_NAMES = frozenset({"time", "timestamp"})

# A plain decimal: no leading zeros (so identifiers such as "007" stay strings), optional
# fraction and exponent. At most 100 characters so normalizing can never round.
_DECIMAL_RE = re.compile(r"[+-]?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]{1,6})?")
_DECIMAL_MAX_LEN = 100
_DECIMAL_CONTEXT = Context(prec=200)
# Beyond this magnitude a fixed-point rendering would be huge; scientific notation is just as
# canonical.
_FIXED_POINT_LIMIT = 50


@dataclass(frozen=True)
class Occurrence:
    """Everything admission needs to know about one delivered payload, in canonical form.

    ``identity_fields`` is ``(("event_id", id),)`` for an event-id identity, otherwise the
    derived fields with their canonical values in declared order. ``immutable_values`` holds
    the immutable fields (``None`` when absent) that the ``content_digest`` covers.
    ``payload_json`` is the delivered object as canonical JSON (sorted keys, no whitespace).
    """

    source: str
    event_id: str | None
    identity_fields: tuple[tuple[str, str], ...]
    admission_key: str
    content_digest: str
    source_time_ms: int
    expires_at_ms: int
    scope_key: str | None
    sequence: str | None
    payload_json: str
    immutable_values: tuple[tuple[str, str | None], ...]


@dataclass(frozen=True)
class ContentView:
    """The comparable content of a payload under a workflow revision; never raises.

    Used to compare a stored run's payload with a new copy under the *same* definition.
    Unreadable values are treated as absent (``None``).
    """

    immutable_values: tuple[tuple[str, str | None], ...]
    source_time_ms: int | None
    digest: str


def is_time_field(name: str, workflow: WorkflowRevised) -> bool:
    """Whether ``name`` is read as an instant (see the module docstring for the rule)."""
    return (
        name in TIME_FIELD_NAMES
        or name.endswith(TIME_FIELD_SUFFIXES)
        or name == workflow.validity_source_time
    )


def canonical_number(value: Decimal) -> str:
    """Normalized decimal rendering: no trailing zeros, no exponent for ordinary magnitudes."""
    normalized = value.normalize(_DECIMAL_CONTEXT)
    if normalized.is_zero():
        return "0"
    if -_FIXED_POINT_LIMIT <= normalized.adjusted() <= _FIXED_POINT_LIMIT:
        return format(normalized, "f")
    return str(normalized)


def admission_key(
    subscription: str,
    environment: str,
    source: str,
    *,
    event_id: str | None = None,
    derived_values: tuple[str, ...] = (),
) -> str:
    """Build an admission key from canonical parts (format in the module docstring)."""
    prefix = f"{_q(subscription)}/{_q(environment)}/{_q(source)}/"
    if event_id is not None:
        return prefix + "e:" + _q(event_id)
    return prefix + "d:" + "|".join(_q(v) for v in derived_values)


def rejection_key(subscription: str, environment: str, delivery_id: str) -> str:
    """Key for a delivery whose identity cannot be derived: ``sub/env/!<delivery id>``."""
    return f"{_q(subscription)}/{_q(environment)}/!{_q(delivery_id)}"


def run_id_for(admission_key: str, rerun_number: int) -> str:
    """Deterministic run id: ``run-`` + first 24 hex of sha256(``"<key>#<rerun>"``).

    Rerun 0 is the run the occurrence was admitted with; authorized reruns count up.
    """
    digest = hashlib.sha256(f"{admission_key}#{rerun_number}".encode()).hexdigest()
    return "run-" + digest[:24]


def content_digest(
    immutable_values: tuple[tuple[str, str | None], ...], source_time_ms: int | None
) -> str:
    """SHA-256 hex of the canonical JSON of the immutable values plus the source time."""
    document = {"immutable": dict(immutable_values), "source_time_ms": source_time_ms}
    return hashlib.sha256(orjson.dumps(document, option=orjson.OPT_SORT_KEYS)).hexdigest()


def canonical_json(payload: Mapping[str, object]) -> str:
    """The payload as canonical JSON: sorted keys, no whitespace (orjson)."""
    return orjson.dumps(dict(payload), option=orjson.OPT_SORT_KEYS).decode()


def identify(workflow: WorkflowRevised, payload: Mapping[str, object]) -> Occurrence:
    """Derive the occurrence identity, deadline, scope and content of a delivered payload.

    Raises :class:`~streams.core.errors.IdentityError` naming *all* missing and invalid
    fields: identity fields (the event id when present, otherwise every derived field), the
    source time (``candle_open`` and ``interval`` for ``candle_close``), scope and sequence
    fields, and unreadable immutable fields (an absent immutable field is allowed and hashed
    as null). ``expires_at_ms`` is ``source_time_ms + validity_window_ms``.
    """
    reader = _Reader(workflow, payload)
    source = reader.source()

    event_id: str | None = None
    if workflow.identity_event_id_field is not None:
        event_id = reader.value(workflow.identity_event_id_field, required=False, opaque=True)
    identity_fields: tuple[tuple[str, str], ...]
    if event_id is not None:
        identity_fields = ((EVENT_ID_IDENTITY, event_id),)
    elif workflow.identity_derived_fields:
        identity_fields = tuple(
            (name, reader.value(name, required=True) or "")
            for name in workflow.identity_derived_fields
        )
    else:
        # Only an event-id route is declared and the payload has no id: nothing to key on.
        reader.note_missing(workflow.identity_event_id_field or EVENT_ID_IDENTITY)
        identity_fields = ()

    source_time_ms = reader.source_time()
    immutable_values = tuple(
        (name, reader.value(name, required=False, structured=True))
        for name in workflow.immutable_fields
    )
    scope_values = tuple(
        (name, reader.value(name, required=True) or "") for name in workflow.scope_fields
    )
    sequence: str | None = None
    if workflow.scope_sequence_field is not None:
        sequence = reader.value(workflow.scope_sequence_field, required=True)

    try:
        payload_json = canonical_json(payload)
    except TypeError:
        reader.note_invalid("payload", "payload is not plain JSON")
        payload_json = ""

    reader.raise_if_any()
    if source_time_ms is None:  # unreachable: source_time() notes a problem when it fails
        raise IdentityError(missing=(workflow.validity_source_time,))

    return Occurrence(
        source=source,
        event_id=event_id,
        identity_fields=identity_fields,
        admission_key=admission_key(
            workflow.subscription,
            workflow.environment,
            source,
            event_id=event_id,
            derived_values=tuple(v for _, v in identity_fields),
        ),
        content_digest=content_digest(immutable_values, source_time_ms),
        source_time_ms=source_time_ms,
        expires_at_ms=source_time_ms + workflow.validity_window_ms,
        scope_key=_scope_key(workflow.environment, scope_values),
        sequence=sequence,
        payload_json=payload_json,
        immutable_values=immutable_values,
    )


def content_view(workflow: WorkflowRevised, payload: Mapping[str, object]) -> ContentView:
    """The immutable values, source time and digest of ``payload`` under ``workflow``.

    Unlike :func:`identify` this never raises; anything unreadable counts as absent. For a
    payload :func:`identify` accepts, ``digest`` equals ``Occurrence.content_digest``.
    """
    reader = _Reader(workflow, payload)
    immutable_values = tuple(
        (name, reader.value(name, required=False, structured=True))
        for name in workflow.immutable_fields
    )
    source_time_ms = reader.source_time()
    return ContentView(
        immutable_values=immutable_values,
        source_time_ms=source_time_ms,
        digest=content_digest(immutable_values, source_time_ms),
    )


def differing_fields(original: ContentView, other: ContentView) -> tuple[str, ...]:
    """Names of immutable fields whose canonical values differ, then ``source_time``."""
    theirs = dict(other.immutable_values)
    names = [name for name, value in original.immutable_values if theirs.get(name) != value]
    if original.source_time_ms != other.source_time_ms:
        names.append(SOURCE_TIME)
    return tuple(names)


def _q(component: str) -> str:
    return quote(component, safe="")


def _scope_key(environment: str, values: tuple[tuple[str, str], ...]) -> str | None:
    # Field names are part of the key and sorted, so two workflows listing the same scope
    # fields in a different order share a decision scope, and different field sets cannot
    # produce the same key by accident.
    if not values:
        return None
    parts = [f"{name}={_q(value)}" for name, value in sorted(values)]
    return "|".join([_q(environment), *parts])


class _FieldProblem(Exception):
    def __init__(self, missing: bool, detail: str = "") -> None:
        self.missing = missing
        self.detail = detail
        super().__init__(detail)


class _Reader:
    """Reads canonical field values from one payload, collecting every problem."""

    def __init__(self, workflow: WorkflowRevised, payload: Mapping[str, object]) -> None:
        self.workflow = workflow
        self.payload = payload
        self.missing: list[str] = []
        self.invalid: list[str] = []
        self.details: list[str] = []

    def note_missing(self, name: str) -> None:
        if name not in self.missing and name not in self.invalid:
            self.missing.append(name)

    def note_invalid(self, name: str, detail: str) -> None:
        if name not in self.missing and name not in self.invalid:
            self.invalid.append(name)
            self.details.append(f"{name}: {detail}")

    def raise_if_any(self) -> None:
        if self.missing or self.invalid:
            raise IdentityError(self.missing, self.invalid, self.details)

    def source(self) -> str:
        try:
            value = _canonical(self.payload.get("source"), time=False, opaque=True)
        except _FieldProblem as problem:
            if problem.missing:
                return UNKNOWN_SOURCE
            self.note_invalid("source", problem.detail)
            return UNKNOWN_SOURCE
        return value

    def value(
        self, name: str, *, required: bool, opaque: bool = False, structured: bool = False
    ) -> str | None:
        """Canonical value of ``name``; ``None`` (and a noted problem) when unusable."""
        time = not opaque and is_time_field(name, self.workflow)
        try:
            return _canonical(
                self.payload.get(name), time=time, opaque=opaque, structured=structured
            )
        except _FieldProblem as problem:
            if not problem.missing:
                self.note_invalid(name, problem.detail)
            elif required:
                self.note_missing(name)
            return None

    def source_time(self) -> int | None:
        field = self.workflow.validity_source_time
        if field == CANDLE_CLOSE:
            open_value = self.value(CANDLE_OPEN_FIELD, required=True)
            interval_ms = self._interval()
            if open_value is None or interval_ms is None:
                return None
            return int(open_value) + interval_ms
        value = self.value(field, required=True)
        return None if value is None else int(value)

    def _interval(self) -> int | None:
        raw = self.payload.get(INTERVAL_FIELD)
        if raw is None or (isinstance(raw, str) and not raw.strip()):
            self.note_missing(INTERVAL_FIELD)
            return None
        try:
            return parse_interval(raw)
        except InvalidValue as exc:
            self.note_invalid(INTERVAL_FIELD, str(exc))
            return None


def _canonical(value: object, *, time: bool, opaque: bool = False, structured: bool = False) -> str:
    """Canonical string of one field value, or raise _FieldProblem (missing or invalid)."""
    if value is None:
        raise _FieldProblem(missing=True)
    if isinstance(value, str) and not value.strip():
        raise _FieldProblem(missing=True)
    if time:
        try:
            return str(parse_time(value))
        except InvalidValue as exc:
            raise _FieldProblem(missing=False, detail=str(exc)) from exc
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        text = value.strip()
        if not opaque and len(text) <= _DECIMAL_MAX_LEN and _DECIMAL_RE.fullmatch(text):
            try:
                return canonical_number(Decimal(text))
            except (InvalidOperation, ArithmeticError):
                return text
        return text
    if isinstance(value, int):
        return canonical_number(Decimal(value))
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _FieldProblem(missing=False, detail="is not a finite number")
        return canonical_number(Decimal(repr(value)))
    if structured and isinstance(value, list | dict):
        try:
            return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
        except TypeError as exc:
            raise _FieldProblem(missing=False, detail="is not plain JSON") from exc
    raise _FieldProblem(
        missing=False, detail=f"must be a string or number, got {type(value).__name__}"
    )
