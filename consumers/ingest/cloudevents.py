"""Reading a hook request's body into what it delivers: a plain payload or CloudEvents.

The CloudEvents HTTP binding's three modes, told apart by the request alone (so the answer
does not depend on what is configured):

- **structured**: ``Content-Type: application/cloudevents+json``, the body one event in the
  JSON format;
- **batched**: ``application/cloudevents-batch+json``, a JSON array of events (at most
  :data:`~streams.core.cloudevents.MAX_BATCH_EVENTS`, possibly none), each its own delivery
  with its own answer;
- **binary**: any other media type when the request has one of the ``ce-specversion``,
  ``ce-id``, ``ce-source`` or ``ce-type`` headers: the ``ce-`` headers are the attributes,
  the body is the data.

Each event is checked against the spec by :mod:`streams.core.cloudevents`; a body that is not
JSON at all, or a batch that is not an array, is refused as a whole (:class:`InvalidBody`,
:class:`PayloadTooLarge` for a batch over the limit). A structured event's top-level
``token`` attribute is the body token; a batch or a binary-mode event has none (use
``?token=`` or a signature).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from consumers.ingest.errors import InvalidBody, PayloadTooLarge, Problem
from consumers.ingest.parsing import BATCH, BINARY, STRUCTURED, json_value, parse_body
from streams.core.cloudevents import (
    HEADER_PREFIX,
    MAX_BATCH_EVENTS,
    REQUIRED,
    CloudEvent,
    binary_event,
    read_batch,
    read_event,
)
from streams.core.errors import Refusal
from streams.core.intake import TOKEN_FIELD

Item = dict[str, object] | CloudEvent | Refusal
"""One delivery's worth: a plain payload, a checked event, or why the event is not one."""

_BINARY_MARKERS = frozenset(HEADER_PREFIX + name for name in REQUIRED)


@dataclass(frozen=True)
class Received:
    """What a body delivers: one item (or one per event of a batch) and the body token."""

    items: tuple[Item, ...]
    batch: bool
    body_token: object = None


def is_binary(headers: Mapping[str, str]) -> bool:
    """Whether the request carries a binary-mode CloudEvent (a required attribute's header)."""
    return any(name.lower() in _BINARY_MARKERS for name in headers)


def receive(raw: bytes, kind: str, headers: Mapping[str, str]) -> Received:
    """The deliveries of a body of ``kind``; :class:`InvalidBody` when it has none."""
    if kind == STRUCTURED:
        value = json_value(raw)
        token = value.get(TOKEN_FIELD) if isinstance(value, dict) else None
        return Received((read_event(value),), batch=False, body_token=token)
    if kind == BATCH:
        value = json_value(raw)
        if isinstance(value, list) and len(value) > MAX_BATCH_EVENTS:
            raise PayloadTooLarge(
                f"a batch holds at most {MAX_BATCH_EVENTS} events",
                [Problem("body", f"{len(value)} events; send at most {MAX_BATCH_EVENTS}")],
            )
        events = read_batch(value)
        if isinstance(events, Refusal):
            raise InvalidBody(
                "the body must be a JSON array of CloudEvents",
                [Problem(p.field, p.message) for p in events.problems],
            )
        return Received(tuple(events), batch=True)
    if kind == BINARY:
        attributes = [(k, v) for k, v in headers.items() if k.lower().startswith(HEADER_PREFIX)]
        event = binary_event(attributes, headers.get("Content-Type"), raw)
        return Received((event,), batch=False)
    payload = parse_body(raw, kind)
    return Received((payload,), batch=False, body_token=payload.get(TOKEN_FIELD))
