"""Bytes for the gateway's state store and its changelog: one :class:`RunJournal` per run.

Format (version 1): an orjson array ``[1, run_id, [action, ...], checkpoint, since_checkpoint,
recovery, recovery_evidence, recoveries, absence_not_before_ms, updated_at_ms]``; an action is
a positional array in :class:`ActionState` field order with its status (and ``held_from``) as
the string value; a journal record (intent, attempt, receipt, ...) is the positional array of
its fields, ``null`` when absent. Positional arrays keep records small and the codec fast.

:func:`decode_state` raises :class:`~streams.core.errors.UnsupportedStateVersion` for another
version and :class:`~streams.core.errors.StateFormatError` for bytes that are not a journal
state. A new format gets a new version number and a decoder for the old one.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, TypeVar

import orjson

from schemas.events import (
    ActionHeld,
    ActionIntended,
    AttemptStarted,
    ExposureRecorded,
    ReceiptRecorded,
    RecoveryStarted,
    RunCheckpointed,
)
from streams.core.errors import StateFormatError, UnsupportedStateVersion
from streams.core.journal.lifecycle import ActionStatus
from streams.core.journal.model import ActionState, RunJournal

STATE_FORMAT_VERSION = 1
R = TypeVar("R")
_KINDS: dict[type, tuple[str, ...]] = {}
_KIND_OF = {str: "str", int: "int", str | None: "str?", int | None: "int?", tuple[str, ...]: "strs"}


def encode_state(state: RunJournal) -> bytes:
    """Serialize ``state``; ``decode_state(encode_state(s)) == s`` for every state."""
    return orjson.dumps(
        [
            STATE_FORMAT_VERSION,
            state.run_id,
            [_encode_action(a) for a in state.actions],
            _fields(state.checkpoint),
            state.since_checkpoint,
            _fields(state.recovery),
            state.recovery_evidence,
            state.recoveries,
            state.absence_not_before_ms,
            state.updated_at_ms,
        ]
    )


def _encode_action(action: ActionState) -> list[object]:
    return [
        action.action_id,
        action.slot,
        action.status.value,
        _fields(action.intent),
        [_fields(a) for a in action.attempts],
        _fields(action.receipt),
        action.last_observed_at_ms,
        action.queries,
        action.last_query_at_ms,
        action.reconcile_since_ms,
        _fields(action.hold),
        None if action.held_from is None else action.held_from.value,
        _fields(action.exposure),
        action.verified_at_ms,
        action.invalid,
    ]


def _fields(record: object | None) -> list[object] | None:
    if record is None:
        return None
    return [getattr(record, f.name) for f in dataclasses.fields(record)]  # type: ignore[arg-type]


def decode_state(data: bytes) -> RunJournal:
    """Parse bytes written by :func:`encode_state` (see the module docstring for errors)."""
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise StateFormatError(f"journal state is not JSON: {exc}") from exc
    if not isinstance(document, list) or not document:
        raise StateFormatError("journal state is not a versioned record")
    version = document[0]
    if version != STATE_FORMAT_VERSION or isinstance(version, bool):
        raise UnsupportedStateVersion(version)
    try:
        _, run_id, actions, checkpoint, since, recovery, evidence, recoveries, fence, at = document
        return RunJournal(
            run_id=_of(str, run_id),
            actions=tuple(_decode_action(a) for a in _of(list, actions)),
            checkpoint=_record(RunCheckpointed, checkpoint),
            since_checkpoint=_strings(since),
            recovery=_record(RecoveryStarted, recovery),
            recovery_evidence=_strings(evidence),
            recoveries=_of(int, recoveries),
            absence_not_before_ms=None if fence is None else _of(int, fence),
            updated_at_ms=_of(int, at),
        )
    except (TypeError, ValueError) as exc:
        raise StateFormatError(f"journal state record is malformed: {exc}") from exc


def _decode_action(fields: Any) -> ActionState:
    (
        action_id,
        slot,
        status,
        intent,
        attempts,
        receipt,
        last_observed,
        queries,
        last_query,
        since,
        hold,
        held_from,
        exposure,
        verified,
        invalid,
    ) = _of(list, fields)
    return ActionState(
        action_id=_of(str, action_id),
        slot=_of(str, slot),
        status=ActionStatus(_of(str, status)),
        intent=_record(ActionIntended, intent),
        attempts=tuple(_need(AttemptStarted, a) for a in _of(list, attempts)),
        receipt=_record(ReceiptRecorded, receipt),
        last_observed_at_ms=_opt_int(last_observed),
        queries=_of(int, queries),
        last_query_at_ms=_opt_int(last_query),
        reconcile_since_ms=_opt_int(since),
        hold=_record(ActionHeld, hold),
        held_from=None if held_from is None else ActionStatus(_of(str, held_from)),
        exposure=_record(ExposureRecorded, exposure),
        verified_at_ms=_opt_int(verified),
        invalid=_of(bool, invalid),
    )


def _record(cls: type[R], value: object) -> R | None:
    return None if value is None else _need(cls, value)


def _need(cls: type[R], value: object) -> R:
    """``cls`` from its positional fields; a record stored before fields were added at its
    end (with defaults, as schema evolution requires) gets those defaults."""
    values = _of(list, value)
    kinds = _kinds(cls)
    if not _least_fields(cls) <= len(values) <= len(kinds):
        raise ValueError(f"{cls.__name__} needs {len(kinds)} fields, got {len(values)}")
    return cls(*(_value(kind, v) for kind, v in zip(kinds, values, strict=False)))


def _least_fields(cls: type) -> int:
    """How many leading fields of ``cls`` have no default."""
    count = 0
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
            break
        count += 1
    return count


def _kinds(cls: type) -> tuple[str, ...]:
    known = _KINDS.get(cls)
    if known is None:
        hints = typing.get_type_hints(cls)
        known = tuple(_KIND_OF[hints[f.name]] for f in dataclasses.fields(cls))
        _KINDS[cls] = known
    return known


def _value(kind: str, value: object) -> object:
    if value is None and kind.endswith("?"):
        return None
    if kind == "strs":
        return _strings(value)
    return _of(str if kind.startswith("str") else int, value)


def _strings(value: object) -> tuple[str, ...]:
    return tuple(_of(str, v) for v in _of(list, value))


def _opt_int(value: object) -> int | None:
    return None if value is None else _of(int, value)


def _of(kind: type[R], value: object) -> R:
    # Cheap isinstance tests: a foreign record fails here, loudly, not deep inside decide.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise TypeError(f"expected {kind.__name__}, got {type(value).__name__}")
    return value
