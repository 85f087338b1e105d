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

A CloudEvent is checked against the spec first (:mod:`streams.core.cloudevents`, by the
door, which also reads it from HTTP headers); intake then takes it as the payload when the
workflow's ``identity.envelope`` is ``cloudevents`` (identity: ``source`` + ``id``; fields:
attributes or ``data.<member>``), with step 1 and no step 2.

A :class:`~streams.core.errors.Refusal` carries structured problems (field, role, message):
nobody reads a refusal's message to learn what it means.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from schemas.commands import AdmitDelivery
from schemas.events import WorkflowRevised
from streams.core.cloudevents import CloudEvent
from streams.core.documents import REPEATED, DuplicateKey, TooDeep, parse_json_object
from streams.core.errors import FieldProblem, FieldRole, IdentityError, Refusal
from streams.core.fields import CANDLE_CLOSE, CANDLE_OPEN_FIELD, CLOUDEVENTS, INTERVAL_FIELD
from streams.core.identity import SOURCE_FIELD, identify
from streams.core.reasons import REFUSE_CLOUDEVENT_REQUIRED, REFUSE_CLOUDEVENTS_NOT_ENABLED
from streams.core.refusals import check_delivery

__all__ = [
    "REPEATED",
    "TOKEN_FIELD",
    "DuplicateKey",
    "TooDeep",
    "declared_fields",
    "intake",
    "map_fields",
    "parse_json_object",
]

TOKEN_FIELD = "token"
"""A reserved field name: the webhook's secret token, removed from every payload."""


def intake(
    payload: Mapping[str, object] | CloudEvent,
    workflow: WorkflowRevised,
    *,
    delivery_id: str,
    received_at_ms: int,
    channel: str,
    now_ms: int,
) -> AdmitDelivery | Refusal:
    """The ``AdmitDelivery`` for one delivery of ``payload`` to ``workflow``'s destination, or
    the :class:`~streams.core.errors.Refusal` admission would answer it with (see the module
    docstring for the steps). ``now_ms`` is the door's clock, for the future-time check.

    A :class:`~streams.core.cloudevents.CloudEvent` (checked by the door with
    :mod:`streams.core.cloudevents`) is taken by a CloudEvents workflow only, and a plain
    payload by the others (``cloudevents_not_enabled``, ``cloudevent_required``); the event's
    JSON format is the payload, its ``token`` attribute removed, no names mapped.
    """
    mismatch = _envelope_mismatch(payload, workflow)
    if mismatch is not None:
        return mismatch
    fields: Mapping[str, object]
    if isinstance(payload, CloudEvent):
        fields = payload.envelope
        if TOKEN_FIELD in fields:
            fields = {k: v for k, v in fields.items() if k != TOKEN_FIELD}
    else:
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


def _envelope_mismatch(
    payload: Mapping[str, object] | CloudEvent, workflow: WorkflowRevised
) -> Refusal | None:
    wants = workflow.identity_envelope == CLOUDEVENTS
    if isinstance(payload, CloudEvent) == wants:
        return None
    destination = f"{workflow.subscription}/{workflow.environment}"
    if wants:
        message = (
            "this destination takes CloudEvents 1.0 only: send application/cloudevents+json, "
            "a batch, or ce- headers (a publish line: the event with its specversion)"
        )
        return Refusal(
            REFUSE_CLOUDEVENT_REQUIRED,
            (FieldProblem("specversion", FieldRole.ATTRIBUTE, message),),
            f"{destination} takes CloudEvents only; the delivery is not one",
        )
    message = (
        "this destination's workflow does not take CloudEvents (its identity is not the "
        "event's source and id): send the data as a plain JSON object, or apply a workflow "
        'with [workflow.identity] envelope = "cloudevents" under a new subscription'
    )
    return Refusal(
        REFUSE_CLOUDEVENTS_NOT_ENABLED,
        (FieldProblem("specversion", FieldRole.ATTRIBUTE, message),),
        f"{destination} does not take CloudEvents; the delivery is one",
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
