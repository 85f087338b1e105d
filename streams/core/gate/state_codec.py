"""Bytes for the gate's state store and its changelog topic (``gate-changelog``).

Format (version 1): an orjson array
``[1, scope_key, [track, ...], [settled, ...], [held, ...], [decision, ...]]`` with

* track: ``[kind, generation, generation_kind, candidate_id, pending]``, ``pending`` being
  ``null`` or the :class:`~streams.core.gate.state.Candidate` fields in declaration order;
* settled: ``[candidate_id, status, forget_at_ms]``;
* held: ``[candidate_id, [approval, ...], expires_at_ms, clock_uncertainty_ms,
  requested_at_ms, forget_at_ms]``;
* decision: ``[candidate_id, kind, outcome, reason, generation, decided_at_ms]``.

Positional arrays keep the record small and the codec fast (it runs for every record the
gate handles). :func:`decode_state` raises
:class:`~streams.core.errors.UnsupportedStateVersion` for another version and
:class:`~streams.core.errors.StateFormatError` for bytes that are not a gate state. A new
format gets a new version number and a decoder for the old one; old bytes are never
reinterpreted.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable
from typing import Any

import orjson

from streams.core.errors import StateFormatError, UnsupportedStateVersion
from streams.core.gate.lifecycle import CandidateStatus
from streams.core.gate.state import Candidate, Decision, HeldRequest, ScopeState, Settled, Track

STATE_FORMAT_VERSION = 1


def encode_state(state: ScopeState) -> bytes:
    """Serialize ``state``; ``decode_state(encode_state(s)) == s`` for every state."""
    return orjson.dumps(
        [
            STATE_FORMAT_VERSION,
            state.scope_key,
            [
                [
                    t.kind,
                    t.generation,
                    t.generation_kind,
                    t.candidate_id,
                    None if t.pending is None else _candidate_values(t.pending),
                ]
                for t in state.tracks
            ],
            [[s.candidate_id, s.status.value, s.forget_at_ms] for s in state.settled],
            [
                [
                    h.candidate_id,
                    h.approvals,
                    h.expires_at_ms,
                    h.clock_uncertainty_ms,
                    h.requested_at_ms,
                    h.forget_at_ms,
                ]
                for h in state.held
            ],
            [
                [d.candidate_id, d.kind, d.outcome, d.reason, d.generation, d.decided_at_ms]
                for d in state.recent
            ],
        ]
    )


def decode_state(data: bytes) -> ScopeState:
    """Parse bytes written by :func:`encode_state` (see the module docstring for errors)."""
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise StateFormatError(f"gate state is not JSON: {exc}") from exc
    if not isinstance(document, list) or not document:
        raise StateFormatError("gate state is not a versioned record")
    version = document[0]
    if version != STATE_FORMAT_VERSION or isinstance(version, bool):
        raise UnsupportedStateVersion(version)
    try:
        _, scope_key, tracks, settled, held, recent = document
        return ScopeState(
            scope_key=_str(scope_key),
            tracks=tuple(_track(t) for t in _list(tracks)),
            settled=tuple(_settled(s) for s in _list(settled)),
            held=tuple(_held(h) for h in _list(held)),
            recent=tuple(_decision(d) for d in _list(recent)),
        )
    except (TypeError, ValueError) as exc:
        raise StateFormatError(f"gate state record is malformed: {exc}") from exc


def _track(value: object) -> Track:
    kind, generation, generation_kind, candidate_id, pending = _list(value)
    return Track(
        kind=_str(kind),
        generation=_str(generation),
        generation_kind=_str(generation_kind),
        candidate_id=_str(candidate_id),
        pending=None if pending is None else _candidate(pending),
    )


_STATUS = {status.value: status for status in CandidateStatus}


def _settled(value: object) -> Settled:
    candidate_id, status, forget_at_ms = _list(value)
    known = _STATUS.get(status) if isinstance(status, str) else None
    if known is None:
        raise ValueError(f"unknown candidate status {status!r}")
    return Settled(_str(candidate_id), known, _int(forget_at_ms))


def _held(value: object) -> HeldRequest:
    candidate_id, approvals, expires_at_ms, uncertainty, requested_at_ms, forget_at_ms = _list(
        value
    )
    return HeldRequest(
        candidate_id=_str(candidate_id),
        approvals=tuple(_str(a) for a in _list(approvals)),
        expires_at_ms=_opt_int(expires_at_ms),
        clock_uncertainty_ms=_int(uncertainty),
        requested_at_ms=_int(requested_at_ms),
        forget_at_ms=_int(forget_at_ms),
    )


def _decision(value: object) -> Decision:
    candidate_id, kind, outcome, reason, generation, decided_at_ms = _list(value)
    return Decision(
        candidate_id=_str(candidate_id),
        kind=_str(kind),
        outcome=_str(outcome),
        reason=_opt_str(reason),
        generation=_str(generation),
        decided_at_ms=_int(decided_at_ms),
    )


# The checks below are cheap isinstance tests; they make a foreign record fail here, loudly,
# instead of as a confusing TypeError deep inside decide.


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


def _list(value: object) -> list[object]:
    if not isinstance(value, list):
        raise TypeError(f"expected an array, got {type(value).__name__}")
    return value


_CHECKS: dict[object, Callable[[object], object]] = {
    str: _str,
    int: _int,
    str | None: _opt_str,
    int | None: _opt_int,
}
_HINTS = typing.get_type_hints(Candidate)
_CANDIDATE_FIELDS: tuple[tuple[str, Callable[[object], object]], ...] = tuple(
    (f.name, _CHECKS[_HINTS[f.name]]) for f in dataclasses.fields(Candidate)
)


def _candidate_values(c: Candidate) -> list[object]:
    return [getattr(c, name) for name, _ in _CANDIDATE_FIELDS]


def _candidate(value: object) -> Candidate:
    values = _list(value)
    if len(values) != len(_CANDIDATE_FIELDS):
        raise ValueError(f"a candidate has {len(_CANDIDATE_FIELDS)} fields, got {len(values)}")
    checked: list[Any] = [check(v) for (_, check), v in zip(_CANDIDATE_FIELDS, values, strict=True)]
    return Candidate(*checked)
