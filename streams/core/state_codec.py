"""Bytes for the admission state store and its changelog topic.

Format (version 3): an orjson array ``[2, admission_key, evict_at_ms, [run, ...]]`` where each
run is a positional array in :class:`~streams.core.admission.RunState` field order with the
status as its string value and ``slots`` as ``[[slot, status, attempt, timeout_at_ms], ...]``.
In every run after the first (the reruns), ``payload_json``, ``scope_key`` and ``sequence``
are ``null`` when equal to the first run's (they always are: a rerun reruns the occurrence)
and ``[value]`` otherwise, so a state holds the payload once however many reruns it has.
Positional arrays rather than objects keep the record small and the codec fast: it runs for
every record the processor handles.

Version 2 is the same without the last six run fields (the action policy and the run's
proposal: ``action_propose_slot``, ``action_approve_slots``, ``action_exit_window_ms``,
``generation_kind``, ``proposal_dequeued_at_ms``, ``proposed_kind``); it decodes with no
actions. Version 1 (written before 0.2.0) is version 2 without the sharing and without the
run fields ``branch_attempts`` and ``clock_uncertainty_ms``; it decodes with 3 and 250 ms.

:func:`decode_state` raises :class:`~streams.core.errors.UnsupportedStateVersion` for any
version other than :data:`STATE_FORMAT_VERSION` and
:class:`~streams.core.errors.StateFormatError` for bytes that are not a state record. A new
format gets a new version number and a decoder for the old one; never reinterpret old bytes.
"""

from __future__ import annotations

from enum import Enum
from typing import TypeVar

import orjson

from streams.core.admission import DEFAULT_BRANCH_ATTEMPTS, OccurrenceState, RunState, SlotState
from streams.core.admission.state import build_run_state
from streams.core.errors import StateFormatError, UnsupportedStateVersion
from streams.core.lifecycle import BranchStatus, RunStatus
from streams.core.limits import DEFAULT_CLOCK_UNCERTAINTY_MS

STATE_FORMAT_VERSION = 3
_VERSIONS = (1, 2, 3)
_V1_RUN_FIELDS = 24


def encode_state(state: OccurrenceState) -> bytes:
    """Serialize ``state``; ``decode_state(encode_state(s)) == s`` for every state."""
    return orjson.dumps(
        [
            STATE_FORMAT_VERSION,
            state.admission_key,
            state.evict_at_ms,
            [_encode_run(run, state.runs[0] if i else None) for i, run in enumerate(state.runs)],
        ]
    )


def _shared(value: str | None, original: str | None) -> list[str | None] | None:
    return None if value == original else [value]


def _encode_run(run: RunState, original: RunState | None) -> list[object]:
    payload: object = run.payload_json
    scope_key: object = run.scope_key
    sequence: object = run.sequence
    if original is not None:
        payload = _shared(run.payload_json, original.payload_json)
        scope_key = _shared(run.scope_key, original.scope_key)
        sequence = _shared(run.sequence, original.sequence)
    return [
        run.run_id,
        run.rerun_number,
        run.status.value,
        run.workflow_revision,
        run.delivery_id,
        run.subscription,
        run.environment,
        run.source,
        run.event_id,
        run.content_digest,
        run.source_time_ms,
        run.expires_at_ms,
        run.validity_source_time,
        run.validity_window_ms,
        scope_key,
        sequence,
        payload,
        run.slot_names,
        [[s.slot, s.status.value, s.attempt, s.timeout_at_ms] for s in run.slots],
        run.branch_timeout_ms,
        run.retention_ms,
        run.rerun_of,
        run.rerun_reason,
        run.admitted_at_ms,
        run.branch_attempts,
        run.clock_uncertainty_ms,
        run.action_propose_slot,
        run.action_approve_slots,
        run.action_exit_window_ms,
        run.generation_kind,
        run.proposal_dequeued_at_ms,
        run.proposed_kind,
    ]


def decode_state(data: bytes) -> OccurrenceState:
    """Parse bytes written by :func:`encode_state` (see the module docstring for errors)."""
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise StateFormatError(f"admission state is not JSON: {exc}") from exc
    if not isinstance(document, list) or not document:
        raise StateFormatError("admission state is not a versioned record")
    version = document[0]
    if isinstance(version, bool) or version not in _VERSIONS:
        raise UnsupportedStateVersion(version)
    try:
        _, key, evict_at_ms, runs = document
        if not isinstance(runs, list):
            raise TypeError("runs must be an array")
        decoded: list[RunState] = []
        for fields in runs:
            decoded.append(_decode_run(fields, version, decoded[0] if decoded else None))
        return OccurrenceState(
            admission_key=_str(key),
            runs=tuple(decoded),
            evict_at_ms=_opt_int(evict_at_ms),
        )
    except (TypeError, ValueError) as exc:
        raise StateFormatError(f"admission state record is malformed: {exc}") from exc


def _decode_run(fields: object, version: int, original: RunState | None) -> RunState:
    if not isinstance(fields, list):
        raise TypeError("a run must be an array")
    branch_attempts: object = DEFAULT_BRANCH_ATTEMPTS
    clock_uncertainty_ms: object = DEFAULT_CLOCK_UNCERTAINTY_MS
    if version == 1 and len(fields) != _V1_RUN_FIELDS:
        raise ValueError(f"a version 1 run has {_V1_RUN_FIELDS} fields, got {len(fields)}")
    actions: list[object] = [None, [], None, None, None, None]
    if version >= 3:
        actions = fields[-6:]
        fields = fields[:-6]
    if version != 1:
        *fields, branch_attempts, clock_uncertainty_ms = fields
    (
        run_id,
        rerun_number,
        status,
        workflow_revision,
        delivery_id,
        subscription,
        environment,
        source,
        event_id,
        content_digest,
        source_time_ms,
        expires_at_ms,
        validity_source_time,
        validity_window_ms,
        scope_key,
        sequence,
        payload_json,
        slot_names,
        slots,
        branch_timeout_ms,
        retention_ms,
        rerun_of,
        rerun_reason,
        admitted_at_ms,
    ) = fields
    if not isinstance(slot_names, list) or not isinstance(slots, list):
        raise TypeError("slot lists must be arrays")
    propose, approve, exit_window, generation_kind, dequeued, proposed = actions
    if not isinstance(approve, list):
        raise TypeError("approve slots must be an array")
    if version != 1 and original is not None:
        payload_json = _unshared(payload_json, original.payload_json)
        scope_key = _unshared(scope_key, original.scope_key)
        sequence = _unshared(sequence, original.sequence)
    return build_run_state(
        run_id=_str(run_id),
        rerun_number=_int(rerun_number),
        status=_member(_RUN_STATUSES, RunStatus, status),
        workflow_revision=_int(workflow_revision),
        delivery_id=_str(delivery_id),
        subscription=_str(subscription),
        environment=_str(environment),
        source=_str(source),
        event_id=_opt_str(event_id),
        content_digest=_str(content_digest),
        source_time_ms=_int(source_time_ms),
        expires_at_ms=_int(expires_at_ms),
        validity_source_time=_str(validity_source_time),
        validity_window_ms=_int(validity_window_ms),
        scope_key=_opt_str(scope_key),
        sequence=_opt_str(sequence),
        payload_json=_str(payload_json),
        slot_names=tuple(_str(name) for name in slot_names),
        slots=tuple(_decode_slot(slot) for slot in slots),
        branch_timeout_ms=_int(branch_timeout_ms),
        retention_ms=_opt_int(retention_ms),
        rerun_of=_opt_str(rerun_of),
        rerun_reason=_opt_str(rerun_reason),
        admitted_at_ms=_int(admitted_at_ms),
        branch_attempts=_int(branch_attempts),
        clock_uncertainty_ms=_int(clock_uncertainty_ms),
        action_propose_slot=_opt_str(propose),
        action_approve_slots=tuple(_str(name) for name in approve),
        action_exit_window_ms=_opt_int(exit_window),
        generation_kind=_opt_str(generation_kind),
        proposal_dequeued_at_ms=_opt_int(dequeued),
        proposed_kind=_opt_str(proposed),
    )


def _unshared(value: object, original: str | None) -> object:
    if value is None:
        return original
    if not isinstance(value, list) or len(value) != 1:
        raise TypeError("a rerun's own value must be a one-element array")
    return value[0]


def _decode_slot(fields: object) -> SlotState:
    if not isinstance(fields, list):
        raise TypeError("a slot must be an array")
    slot, status, attempt, timeout_at_ms = fields
    return SlotState(
        _str(slot),
        _member(_BRANCH_STATUSES, BranchStatus, status),
        _int(attempt),
        _int(timeout_at_ms),
    )


# The checks below are cheap isinstance tests; they make a foreign record fail here, loudly,
# instead of as a confusing TypeError deep inside decide.


E = TypeVar("E", bound=Enum)

# A dict lookup instead of the Enum call (EnumType.__call__ and Enum.__new__ per decoded run).
_RUN_STATUSES: dict[str, RunStatus] = {member.value: member for member in RunStatus}
_BRANCH_STATUSES: dict[str, BranchStatus] = {member.value: member for member in BranchStatus}


def _member(members: dict[str, E], enum: type[E], value: object) -> E:
    """``enum(value)`` for a string ``value``: the same member, the same ``ValueError``."""
    found = members.get(_str(value))
    if found is None:
        raise ValueError(f"{value!r} is not a valid {enum.__name__}")
    return found


def _str(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


def _opt_str(value: object) -> str | None:
    return None if value is None else _str(value)


def _int(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"expected an integer, got {type(value).__name__}")
    return value


def _opt_int(value: object) -> int | None:
    return None if value is None else _int(value)
