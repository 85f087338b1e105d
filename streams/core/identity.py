"""Occurrence identity: which deliveries are copies of the same upstream occurrence.

Used by both the ingest front door (to key the delivery) and the processor (to check the key
and admit), so everything here is a pure, deterministic function of ``(workflow revision,
payload)``. Arrival time, delivery ids and payload hashes never enter an identity: a retry's
arrival time changes, and identical payloads can be separate scheduled occurrences. Every
field value is read in its canonical form first (:mod:`streams.core.canonical`).

The event-id value and ``source`` are opaque: stripped and checked, never read as a number, a
time or folded. ``source`` is required: an identity is per sender. The source time must lie in
2000-01-01 .. 2200-01-01 (:func:`streams.core.durations.check_source_time`).

Every problem names its field and what the workflow reads it for
(:class:`~streams.core.errors.FieldRole`): a field needed only for the decision scope is
reported as a scope field, not as an identity field.

Admission key
-------------
``<subscription>/<environment>/<source>/e:<event id>`` when the workflow declares an
``event_id`` field and the payload carries a non-blank value there, otherwise
``<subscription>/<environment>/<source>/d:<v1>|<v2>|...`` with the canonical values of the
derived fields in declared order. Every component is percent-encoded with
``urllib.parse.quote(safe="")``, so ``/``, ``|`` and ``:`` inside values cannot make two
different identities spell the same key, while plain values stay readable:
``btc-breakout/paper/tradingview/d:binance|BTCUSDT|1m|1796040000000|breakout-v1``.
A CloudEvents workflow (``identity.envelope = "cloudevents"``) keys the event's ``source`` and
``id`` attributes the event-id way; its other fields are attributes or ``data.<member>``
(:data:`streams.core.fields.CLOUDEVENTS`), read in the form their member name gives.
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
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import quote

import orjson

from schemas.events import WorkflowRevised
from streams.core import fields
from streams.core.canonical import Unreadable, canonical, canonical_json
from streams.core.durations import check_source_time, parse_interval
from streams.core.errors import FieldProblem, FieldRole, IdentityError, InvalidValue
from streams.core.fields import (
    CANDLE_CLOSE,
    CANDLE_OPEN_FIELD,
    CLOUDEVENTS,
    DATA_PREFIX,
    INTERVAL_FIELD,
    Kind,
    member_name,
)

SOURCE_FIELD = "source"
CLOUDEVENT_ID = "id"
"""The attribute a CloudEvents workflow's event id is read from (``source`` is the other)."""
EVENT_ID_IDENTITY = "event_id"
"""Name under which an event-id identity appears in ``Occurrence.identity_fields``."""
SOURCE_TIME = "source_time"
"""Name reported in ``differing_fields`` when copies disagree about the source time."""


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


def identify(workflow: WorkflowRevised, payload: Mapping[str, object]) -> Occurrence:
    """Derive the occurrence identity, deadline, scope and content of a delivered payload.

    Raises :class:`~streams.core.errors.IdentityError` listing *all* problems, each with its
    field and role: ``source``, identity fields (the event id when present, otherwise every
    derived field), the source time (``candle_open`` and ``interval`` for ``candle_close``;
    also out of range), scope and sequence fields, and unreadable immutable fields (an absent
    immutable field is allowed and hashed as null). ``expires_at_ms`` is
    ``source_time_ms + validity_window_ms``.
    """
    reader = _Reader(workflow, payload)
    source = reader.value(SOURCE_FIELD, FieldRole.SOURCE, required=True, opaque=True) or ""

    event_id: str | None = None
    if reader.cloudevents:
        event_id = reader.value(CLOUDEVENT_ID, FieldRole.IDENTITY, required=True, opaque=True)
    elif workflow.identity_event_id_field is not None:
        event_id = reader.value(
            workflow.identity_event_id_field, FieldRole.IDENTITY, required=False, opaque=True
        )
    identity_fields: tuple[tuple[str, str], ...]
    if event_id is not None:
        identity_fields = ((EVENT_ID_IDENTITY, event_id),)
    elif reader.cloudevents:
        identity_fields = ()  # the id's problem is noted already
    elif workflow.identity_derived_fields:
        identity_fields = tuple(
            (name, reader.value(name, FieldRole.IDENTITY, required=True) or "")
            for name in workflow.identity_derived_fields
        )
    else:
        # Only an event-id route is declared and the payload has no id: nothing to key on.
        reader.note_missing(workflow.identity_event_id_field or EVENT_ID_IDENTITY)
        identity_fields = ()

    source_time_ms = reader.source_time()
    immutable_values = reader.immutable_values()
    scope_values = tuple(
        (name, reader.value(name, FieldRole.SCOPE, required=True) or "")
        for name in workflow.scope_fields
    )
    sequence: str | None = None
    if workflow.scope_sequence_field is not None:
        sequence = reader.value(workflow.scope_sequence_field, FieldRole.SEQUENCE, required=True)

    try:
        payload_json = canonical_json(payload)
    except TypeError:
        reader.note_invalid("payload", FieldRole.PAYLOAD, "payload is not plain JSON")
        payload_json = ""

    reader.raise_if_any()
    if source_time_ms is None:  # unreachable: source_time() notes a problem when it fails
        raise IdentityError(
            [FieldProblem(workflow.validity_source_time, FieldRole.SOURCE_TIME, "missing", True)]
        )

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
    immutable_values = reader.immutable_values()
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


_KINDS: dict[int, tuple[WorkflowRevised, dict[str, Kind]]] = {}
_KINDS_KEPT = 256


def _kinds_of(workflow: WorkflowRevised) -> dict[str, Kind]:
    """The kinds of the fields read so far under ``workflow`` (the same revision object is
    read for every delivery to its destination), filled as fields are read."""
    entry = _KINDS.get(id(workflow))
    if entry is None or entry[0] is not workflow:  # the entry keeps its workflow alive
        if len(_KINDS) >= _KINDS_KEPT:
            _KINDS.clear()
        entry = _KINDS[id(workflow)] = (workflow, {})
    return entry[1]


_CACHED_INTERVAL_CHARS = 16


@lru_cache(maxsize=1024)
def _interval_ms(text: str) -> int:
    # A workflow's deliveries carry the same few interval strings ("1m", "60", "1D").
    return parse_interval(text)


@lru_cache(maxsize=16384)
def _q(component: str) -> str:
    # Environments, sources, instruments and intervals repeat across deliveries.
    return quote(component, safe="")


def _scope_key(environment: str, values: tuple[tuple[str, str], ...]) -> str | None:
    # Field names are part of the key and sorted, so two workflows listing the same scope
    # fields in a different order share a decision scope, and different field sets cannot
    # produce the same key by accident.
    if not values:
        return None
    parts = [f"{name}={_q(value)}" for name, value in sorted(values)]
    return "|".join([_q(environment), *parts])


class _Reader:
    """Reads canonical field values from one payload, collecting every problem.

    A field is reported once, under the role it was first read for; the reading order
    (source, identity, source time, immutable, scope, sequence) makes a field that is both
    an identity and a scope field an identity problem, and one needed only for the scope a
    scope problem.
    """

    def __init__(self, workflow: WorkflowRevised, payload: Mapping[str, object]) -> None:
        self.workflow = workflow
        self.payload = payload
        self.cloudevents = workflow.identity_envelope == CLOUDEVENTS
        data = payload.get("data") if self.cloudevents else None
        self._data: Mapping[str, object] = data if isinstance(data, dict) else {}
        self._kinds = _kinds_of(workflow)
        self.problems: list[FieldProblem] = []
        self._noted: set[str] = set()

    def note_missing(self, name: str, role: FieldRole = FieldRole.IDENTITY) -> None:
        if name not in self._noted:
            self._noted.add(name)
            self.problems.append(FieldProblem(name, role, "missing", missing=True))

    def note_invalid(self, name: str, role: FieldRole, detail: str) -> None:
        if name not in self._noted:
            self._noted.add(name)
            self.problems.append(FieldProblem(name, role, detail))

    def raise_if_any(self) -> None:
        if self.problems:
            raise IdentityError(self.problems)

    def value(
        self,
        name: str,
        role: FieldRole,
        *,
        required: bool,
        opaque: bool = False,
        structured: bool = False,
    ) -> str | None:
        """Canonical value of ``name``; ``None`` (and a noted problem) when unusable."""
        kind = Kind.TEXT if opaque else self._kinds.get(name) or self._kind_of(name)
        try:
            return canonical(
                self._get(name),
                kind,
                opaque=opaque,
                structured=structured,
                bounded=not structured,
            )
        except Unreadable as problem:
            if not problem.missing:
                self.note_invalid(name, role, problem.detail)
            elif required:
                self.note_missing(name, role)
            return None

    def _kind_of(self, name: str) -> Kind:
        workflow = self.workflow
        source_time = workflow.validity_source_time
        kind_name = name
        if self.cloudevents:
            kind_name, source_time = member_name(name), member_name(source_time)
        kind = fields.field_kind(kind_name, source_time, workflow.identity_case_sensitive_fields)
        self._kinds[name] = kind
        return kind

    def _get(self, name: str) -> object:
        if self.cloudevents and name.startswith(DATA_PREFIX):
            return self._data.get(name[len(DATA_PREFIX) :])
        return self.payload.get(name)

    def immutable_values(self) -> tuple[tuple[str, str | None], ...]:
        return tuple(
            (name, self.value(name, FieldRole.IMMUTABLE, required=False, structured=True))
            for name in self.workflow.immutable_fields
        )

    def source_time(self) -> int | None:
        field = self.workflow.validity_source_time
        role = FieldRole.SOURCE_TIME
        if field == CANDLE_CLOSE:
            open_value = self.value(CANDLE_OPEN_FIELD, role, required=True)
            interval_ms = self._interval()
            if open_value is None or interval_ms is None:
                return None
            ms, named = int(open_value) + interval_ms, CANDLE_OPEN_FIELD
        else:
            value = self.value(field, role, required=True)
            if value is None:
                return None
            ms, named = int(value), field
        wrong = check_source_time(ms)
        if wrong is not None:
            what = "the candle close (candle_open + interval)" if field == CANDLE_CLOSE else "it"
            self.note_invalid(named, role, f"gives a source time out of range: {what} {wrong}")
            return None
        return ms

    def _interval(self) -> int | None:
        raw = self._get(INTERVAL_FIELD)
        if raw is None or (isinstance(raw, str) and not raw.strip()):
            self.note_missing(INTERVAL_FIELD, FieldRole.SOURCE_TIME)
            return None
        try:
            if isinstance(raw, str) and len(raw) <= _CACHED_INTERVAL_CHARS:
                return _interval_ms(raw)
            return parse_interval(raw)
        except InvalidValue as exc:
            self.note_invalid(INTERVAL_FIELD, FieldRole.SOURCE_TIME, str(exc))
            return None
