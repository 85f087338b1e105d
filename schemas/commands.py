"""Commands: requests that the processor decides on, named in the imperative.

Mirrored 1:1 by ``schemas/avro/<ClassName>.avsc`` like the events. A command is not a fact:
it may be refused, and its outcome is an event.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AdmitDelivery:
    """One delivery attempt of an occurrence, keyed by its admission key.

    ``payload_json`` holds the delivered fields as canonical JSON (sorted keys, no spaces).
    ``admission_key`` is computed at ingest from the workflow's identity fields; when the
    identity could not be derived there it is ``subscription/environment/!delivery_id`` so
    that the processor can still record the rejection.
    """

    delivery_id: str
    subscription: str
    environment: str
    admission_key: str
    source: str
    event_id: str | None
    payload_json: str
    received_at_ms: int
    channel: str


@dataclass(frozen=True)
class AuthorizeRerun:
    """An operator's authorized rerun of a run: admits a new run linked to the original."""

    request_id: str
    admission_key: str
    run_id: str
    reason: str
    requested_by: str
    requested_at_ms: int
