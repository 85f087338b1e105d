"""The one intake step of every front door: a delivered payload -> ``AdmitDelivery`` or a refusal.

Both doors, the webhook and ``sluicegate publish``, parse what they received (JSON through
:func:`parse_json_object`, which refuses a key given twice anywhere in the document; the
webhook also reads TradingView's ``key=value`` text), then call :func:`intake` and only
render its answer: an HTTP 4xx body, or ``FILE:LINE: reason: problems``. So every door
refuses, with the same reasons and field names and before anything is produced, what
admission would reject for the payload alone, and keys what it accepts the same way:

1. the reserved ``token`` field (:data:`TOKEN_FIELD`, a webhook credential) is removed, so a
   secret never reaches Kafka;
2. keys that differ from a field the workflow declares only in case or ``-``/space versus
   ``_`` (``Instrument``, ``candle-open``) are renamed to it, unless the exact name is
   present too (:func:`map_fields`); nothing else is renamed, dropped or converted;
3. the occurrence is identified (:func:`streams.core.identity.identify`: every missing or
   unreadable field, with its role) and the content bounds are checked
   (:func:`streams.core.refusals.check_delivery`: payload size, a source time later than
   ``now`` plus the clock uncertainty).

A :class:`~streams.core.errors.Refusal` carries structured problems (field, role, message):
nobody reads a refusal's message to learn what it means.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

import orjson

from schemas.commands import AdmitDelivery
from schemas.events import WorkflowRevised
from streams.core.errors import IdentityError, Refusal
from streams.core.fields import CANDLE_CLOSE, CANDLE_OPEN_FIELD, INTERVAL_FIELD
from streams.core.identity import SOURCE_FIELD, identify
from streams.core.refusals import check_delivery

TOKEN_FIELD = "token"
"""A reserved field name: the webhook's secret token, removed from every payload."""


def intake(
    payload: Mapping[str, object],
    workflow: WorkflowRevised,
    *,
    delivery_id: str,
    received_at_ms: int,
    channel: str,
    now_ms: int,
) -> AdmitDelivery | Refusal:
    """The ``AdmitDelivery`` for one delivery of ``payload`` to ``workflow``'s destination, or
    the :class:`~streams.core.errors.Refusal` admission would answer it with (see the module
    docstring for the steps). ``now_ms`` is the door's clock, for the future-time check."""
    if TOKEN_FIELD in payload:
        payload = {k: v for k, v in payload.items() if k != TOKEN_FIELD}
    fields = map_fields(payload, declared_fields(workflow))
    try:
        occurrence = identify(workflow, fields)
    except IdentityError as e:
        return e.refusal
    refused = check_delivery(workflow, occurrence, now_ms)
    if refused is not None:
        return refused
    return AdmitDelivery(
        delivery_id=delivery_id,
        subscription=workflow.subscription,
        environment=workflow.environment,
        admission_key=occurrence.admission_key,
        source=occurrence.source,
        event_id=occurrence.event_id,
        payload_json=occurrence.payload_json,
        received_at_ms=received_at_ms,
        channel=channel,
    )


def declared_fields(workflow: WorkflowRevised) -> tuple[str, ...]:
    """Every payload field name the workflow refers to, plus ``source``."""
    names: list[str] = [SOURCE_FIELD]
    if workflow.identity_event_id_field:
        names.append(workflow.identity_event_id_field)
    names.extend(workflow.identity_derived_fields)
    names.extend(workflow.immutable_fields)
    if workflow.validity_source_time == CANDLE_CLOSE:
        names.extend((CANDLE_OPEN_FIELD, INTERVAL_FIELD))
    else:
        names.append(workflow.validity_source_time)
    names.extend(workflow.scope_fields)
    if workflow.scope_sequence_field:
        names.append(workflow.scope_sequence_field)
    return tuple(dict.fromkeys(n for n in names if n))


def _normal(name: str) -> str:
    return name.strip().lower().replace("-", "_").replace(" ", "_")


def map_fields(payload: Mapping[str, object], declared: Iterable[str]) -> dict[str, object]:
    """``payload`` with near-miss keys renamed to the ``declared`` names (module docstring, 2)."""
    by_normal: dict[str, str] = {}
    for name in declared:
        by_normal.setdefault(_normal(name), name)
    mapped: dict[str, object] = {}
    renamed: dict[str, object] = {}
    for key, value in payload.items():
        target = by_normal.get(_normal(key))
        if target is None or target == key:
            mapped[key] = value
        elif target in payload or target in renamed:
            # The exact name, or an earlier near miss, already supplies this field.
            mapped[key] = value
        else:
            renamed[target] = value
    mapped.update(renamed)
    return mapped


REPEATED = "given more than once (JSON parsers disagree on which value counts)"
"""What is wrong with a key a JSON document gives twice."""


class DuplicateKey(ValueError):
    """A JSON object gives one key twice; ``path`` names it (``a``, ``a.b``, ``list[1].k``)."""

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(f"{path}: {REPEATED}")


class TooDeep(ValueError):
    """A JSON document nested deeper than the duplicate-key check can follow."""


class _Repeated(dict[str, object]):
    """An object that had a key twice; ``key`` is the first repeated one."""

    key = ""


def parse_json_object(data: bytes | str) -> object:
    """Parse JSON with orjson, refusing objects that repeat a key anywhere in the document.

    JSON parsers disagree on which of two values of one key counts, so a document that gives
    a key twice is refused rather than read one way here and another way downstream. Raises
    ``orjson.JSONDecodeError`` for what orjson refuses (malformed JSON, NaN, lone surrogates,
    ...), :class:`DuplicateKey` naming the first repeated key (after escapes: ``"a"`` and
    ``"\\u0061"`` are one key), and :class:`TooDeep` for documents nested more than about 900
    levels. The value returned is orjson's.
    """
    value = orjson.loads(data)
    repeated = False

    def pairs_hook(pairs: list[tuple[str, object]]) -> dict[str, object]:
        nonlocal repeated
        result = dict(pairs)
        if len(result) == len(pairs):
            return result
        repeated = True
        marked = _Repeated(result)
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                marked.key = key
                break
            seen.add(key)
        return marked

    try:
        checked = json.loads(data, object_pairs_hook=pairs_hook)
    except RecursionError:
        raise TooDeep("the JSON document is nested too deeply") from None
    if repeated:
        raise DuplicateKey(_repeated_path(checked))
    return value


def _repeated_path(document: object) -> str:
    stack: list[tuple[object, str]] = [(document, "")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, _Repeated):
            return f"{path}.{node.key}" if path else node.key
        if isinstance(node, dict):
            stack.extend((v, f"{path}.{k}" if path else k) for k, v in reversed(node.items()))
        elif isinstance(node, list):
            stack.extend((v, f"{path}[{i}]") for i, v in reversed(list(enumerate(node))))
    return "(unknown)"
