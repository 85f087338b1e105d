"""Effect requests: the only side effects of the gateway, as pure values of committed records.

The shell performs :func:`effects_of` of the records of a transaction only **after** that
transaction committed, and feeds each answer back as a command decided in a later
transaction. A crash anywhere in between leaves the record without its answer in the restored
journal, which the core reconciles (timers and recovery). The shell never performs an effect
of a record it read back on restore.

============================  =================================================================
request                       the shell does, then answers with
============================  =================================================================
:class:`SendRequest`          only if it still owns the run's partition in ``owner_generation``
                              and ``now < send_by_ms``: send ``request_json`` under
                              ``client_order_id`` with ``timestamp = timestamp_ms`` and
                              ``recvWindow = recv_window_ms`` (a notification goes to its
                              channel with ``client_order_id`` as idempotency key). Answer
                              ``VenueAnswered``: ``acknowledged`` / ``filled`` / ``rejected``
                              (with ``error_code = duplicate_client_order_id`` when the venue
                              says an open order has this id), ``unknown`` (timeout, 5xx,
                              "execution status unknown"), or ``not_sent`` if it refused to
                              send. Never retry a send itself.
:class:`LookupRequest`        query the order by ``client_order_id`` (``origClientOrderId``),
                              noting ``queried_at_ms`` just before. Answer ``LookupAnswered``:
                              the order's state as ``acknowledged`` / ``filled`` /
                              ``rejected`` (canceled or expired without executions),
                              ``not_found``, or ``unknown`` if the query failed.
:class:`ExposureRequest`      read the account's position in ``instrument``. Answer
                              ``ExposureObserved`` (``observed`` with the quantity, or
                              ``unknown``).
============================  =================================================================

A lost answer is never fatal: the core looks again on its timer.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeAlias

from schemas.events import AttemptStarted, QueryRequested


@dataclass(frozen=True)
class SendRequest:
    """Send one attempt (the values of its committed ``AttemptStarted``)."""

    action_id: str
    run_id: str
    slot: str
    attempt: int
    client_order_id: str
    venue: str
    account: str
    instrument: str
    request_json: str
    timestamp_ms: int
    recv_window_ms: int
    send_by_ms: int
    owner_instance: str
    owner_generation: int


@dataclass(frozen=True)
class LookupRequest:
    """Look an action's order up by its client order id."""

    action_id: str
    run_id: str
    slot: str
    query_number: int
    client_order_id: str
    venue: str
    account: str
    instrument: str


@dataclass(frozen=True)
class ExposureRequest:
    """Read the account's exposure in the run's instrument, to size a protection."""

    action_id: str
    run_id: str
    query_number: int
    venue: str
    account: str
    instrument: str


EffectRequest: TypeAlias = SendRequest | LookupRequest | ExposureRequest


def effects_of(events: Iterable[object]) -> list[EffectRequest]:
    """The requests committed ``events`` ask for, in order (records without one are skipped).

    Only an ``AttemptStarted`` yields a send: nothing is ever sent without one.
    """
    requests: list[EffectRequest] = []
    for event in events:
        if isinstance(event, AttemptStarted):
            requests.append(
                SendRequest(
                    action_id=event.action_id,
                    run_id=event.run_id,
                    slot=event.slot,
                    attempt=event.attempt,
                    client_order_id=event.client_order_id,
                    venue=event.venue,
                    account=event.account,
                    instrument=event.instrument,
                    request_json=event.request_json,
                    timestamp_ms=event.attempted_at_ms,
                    recv_window_ms=event.recv_window_ms,
                    send_by_ms=event.send_by_ms,
                    owner_instance=event.owner_instance,
                    owner_generation=event.owner_generation,
                )
            )
        elif isinstance(event, QueryRequested) and event.query == "order":
            requests.append(
                LookupRequest(
                    action_id=event.action_id,
                    run_id=event.run_id,
                    slot=event.slot,
                    query_number=event.query_number,
                    client_order_id=event.client_order_id,
                    venue=event.venue,
                    account=event.account,
                    instrument=event.instrument,
                )
            )
        elif isinstance(event, QueryRequested):
            requests.append(
                ExposureRequest(
                    action_id=event.action_id,
                    run_id=event.run_id,
                    query_number=event.query_number,
                    venue=event.venue,
                    account=event.account,
                    instrument=event.instrument,
                )
            )
    return requests
