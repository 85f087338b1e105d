"""Admission state bytes (streams.core.state_codec)."""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from schemas.events import RunAdmitted
from streams.core.admission import Admit, OccurrenceState, Rerun, RunState, SlotState
from streams.core.errors import CoreError, StateFormatError, UnsupportedStateVersion
from streams.core.lifecycle import BranchStatus, RunStatus
from streams.core.state_codec import STATE_FORMAT_VERSION, decode_state, encode_state
from tests.support.core import (
    MINUTE,
    T0,
    Processor,
    candle,
    delivery,
    rerun_request,
    workflow,
)

# orjson (like UTF-8) cannot carry lone surrogates; no admitted payload contains them either,
# because payloads are parsed by orjson before they reach the core.
text = st.text(alphabet=st.characters(codec="utf-8"), max_size=20)
ints = st.integers(min_value=-(2**63), max_value=2**63 - 1)
opt_text = st.none() | text
opt_int = st.none() | ints

slot_states = st.builds(
    SlotState,
    slot=text,
    status=st.sampled_from(BranchStatus),
    attempt=ints,
    timeout_at_ms=ints,
)
run_states = st.builds(
    RunState,
    run_id=text,
    rerun_number=ints,
    status=st.sampled_from(RunStatus),
    workflow_revision=ints,
    delivery_id=text,
    subscription=text,
    environment=text,
    source=text,
    event_id=opt_text,
    content_digest=text,
    source_time_ms=ints,
    expires_at_ms=ints,
    validity_source_time=text,
    validity_window_ms=ints,
    scope_key=opt_text,
    sequence=opt_text,
    payload_json=text,
    slot_names=st.lists(text, max_size=4).map(tuple),
    slots=st.lists(slot_states, max_size=4).map(tuple),
    branch_timeout_ms=ints,
    retention_ms=opt_int,
    rerun_of=opt_text,
    rerun_reason=opt_text,
    admitted_at_ms=ints,
    action_propose_slot=opt_text,
    action_approve_slots=st.lists(text, max_size=3).map(tuple),
    action_exit_window_ms=opt_int,
    generation_kind=opt_text,
    proposal_dequeued_at_ms=opt_int,
    proposed_kind=opt_text,
)
states = st.builds(
    OccurrenceState,
    admission_key=text,
    runs=st.lists(run_states, min_size=1, max_size=3).map(tuple),
    evict_at_ms=opt_int,
)


@given(states)
def test_round_trip_of_arbitrary_states(state: OccurrenceState) -> None:
    data = encode_state(state)
    assert isinstance(data, bytes)
    assert decode_state(data) == state


def test_round_trip_of_a_real_state() -> None:
    proc = Processor()
    wf = workflow()
    now = T0 + MINUTE + 1_000
    d = delivery(wf, candle(), "a-1", now)
    proc.handle(Admit(d, wf), now)
    state = proc.state(d.admission_key)
    assert state is not None
    data = encode_state(state)
    assert decode_state(data) == state
    assert orjson.loads(data)[0] == STATE_FORMAT_VERSION


@pytest.mark.parametrize("version", [0, 4, "1", "2", None, True])
def test_unknown_versions_are_refused(version: object) -> None:
    with pytest.raises(UnsupportedStateVersion) as info:
        decode_state(orjson.dumps([version, "k", None, []]))
    assert isinstance(info.value, CoreError)
    assert "roll forward" in str(info.value)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not json",
        b"{}",
        b"[]",
        b'[1, "k", null]',
        b"[1, 5, null, []]",
        b'[1, "k", "soon", []]',
        b'[1, "k", null, [[1, 2]]]',
        b'[1, "k", null, 7]',
    ],
)
def test_malformed_records_are_refused(data: bytes) -> None:
    with pytest.raises(StateFormatError):
        decode_state(data)


def admitted_record() -> list[Any]:
    """The encoded state of one admitted occurrence, as its JSON array."""
    proc = Processor()
    wf = workflow()
    now = T0 + MINUTE + 1_000
    d = delivery(wf, candle(), "a-1", now)
    proc.handle(Admit(d, wf), now)
    state = proc.state(d.admission_key)
    assert state is not None
    record: list[Any] = orjson.loads(encode_state(state))
    return record


def test_unknown_status_is_refused() -> None:
    record = admitted_record()
    for status in ("exploded", 5, None):
        record[3][0][2] = status
        with pytest.raises(StateFormatError, match=r"RunStatus|expected a string"):
            decode_state(orjson.dumps(record))


def test_unknown_slot_status_is_refused() -> None:
    record = admitted_record()
    [slots] = [f for f in record[3][0] if isinstance(f, list) and f and isinstance(f[0], list)]
    assert slots[0][1] == "launched"
    for status in ("exploded", 5):
        slots[0][1] = status
        with pytest.raises(StateFormatError, match=r"BranchStatus|expected a string"):
            decode_state(orjson.dumps(record))


def rerun_state() -> OccurrenceState:
    proc = Processor()
    wf = workflow()
    now = T0 + MINUTE + 1_000
    d = delivery(wf, candle(note="x" * 5_000), "a-1", now)
    [admitted, *_] = proc.handle(Admit(d, wf), now)
    assert isinstance(admitted, RunAdmitted)
    for i in range(3):
        proc.handle(Rerun(rerun_request(d.admission_key, admitted.run_id, f"r{i}"), wf), now)
    state = proc.state(d.admission_key)
    assert state is not None and len(state.runs) == 4
    return state


def test_reruns_share_the_payload_in_the_stored_state() -> None:
    state = rerun_state()
    data = encode_state(state)
    assert data.count(b"x" * 5_000) == 1
    record = orjson.loads(data)
    assert [run[16] for run in record[3][1:]] == [None, None, None]
    assert decode_state(data) == state


def no_actions(run: RunState) -> RunState:
    """``run`` as a record written before the action policy existed decodes."""
    return dataclasses.replace(
        run,
        action_propose_slot=None,
        action_approve_slots=(),
        action_exit_window_ms=None,
        generation_kind=None,
        proposal_dequeued_at_ms=None,
        proposed_kind=None,
    )


def test_version_2_records_decode_with_no_actions() -> None:
    state = rerun_state()
    assert state.original.action_propose_slot == "signal"
    record = orjson.loads(encode_state(state))
    v2_runs = [run[:-6] for run in record[3]]
    decoded = decode_state(orjson.dumps([2, record[1], record[2], v2_runs]))
    assert decoded == dataclasses.replace(state, runs=tuple(no_actions(run) for run in state.runs))


def test_version_1_records_still_decode() -> None:
    state = rerun_state()
    record = orjson.loads(encode_state(state))
    # Version 1: no sharing and no branch_attempts / clock_uncertainty_ms.
    v1_runs = []
    for i, run in enumerate(record[3]):
        fields = run[:-8]
        if i:
            original = state.runs[0]
            fields[14], fields[15], fields[16] = (
                original.scope_key,
                original.sequence,
                original.payload_json,
            )
        v1_runs.append(fields)
    decoded = decode_state(orjson.dumps([1, record[1], record[2], v1_runs]))
    assert decoded == dataclasses.replace(
        state,
        runs=tuple(
            dataclasses.replace(no_actions(run), branch_attempts=3, clock_uncertainty_ms=250)
            for run in state.runs
        ),
    )
    with pytest.raises(StateFormatError):
        decode_state(orjson.dumps([1, record[1], record[2], record[3]]))  # v2 runs as v1
