"""Gate state bytes (streams.core.gate.state_codec)."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.core.errors import CoreError, StateFormatError, UnsupportedStateVersion
from streams.core.gate import (
    Candidate,
    CandidateStatus,
    Decision,
    HeldRequest,
    ScopeState,
    Settled,
    Track,
    decode_state,
    encode_state,
)
from streams.core.gate.state_codec import STATE_FORMAT_VERSION
from tests.support.gate import T0, Gate, proposal, request

# orjson (like UTF-8) cannot carry lone surrogates; no record reaching the gate has them
# either, because every record was Avro-decoded from UTF-8 first.
text = st.text(alphabet=st.characters(codec="utf-8"), max_size=12)
ints = st.integers(min_value=-(2**63), max_value=2**63 - 1)
opt_text = st.none() | text
opt_int = st.none() | ints

candidates = st.builds(
    Candidate,
    **{
        name: {"str": text, "int": ints, "str | None": opt_text, "int | None": opt_int}[kind]
        for name, kind in Candidate.__annotations__.items()
    },
)
tracks = st.builds(
    Track,
    kind=text,
    generation=text,
    generation_kind=text,
    candidate_id=text,
    pending=st.none() | candidates,
)
states = st.builds(
    ScopeState,
    scope_key=text,
    tracks=st.lists(tracks, max_size=3).map(tuple),
    settled=st.lists(
        st.builds(Settled, text, st.sampled_from(CandidateStatus), ints), max_size=4
    ).map(tuple),
    held=st.lists(
        st.builds(
            HeldRequest, text, st.lists(text, max_size=3).map(tuple), opt_int, ints, ints, ints
        ),
        max_size=3,
    ).map(tuple),
    recent=st.lists(st.builds(Decision, text, text, text, opt_text, text, ints), max_size=4).map(
        tuple
    ),
)


@given(states)
def test_round_trip_of_arbitrary_states(state: ScopeState) -> None:
    data = encode_state(state)
    assert isinstance(data, bytes)
    assert decode_state(data) == state


def real_state() -> ScopeState:
    gate = Gate()
    at = T0 + 1_000
    gate.propose(proposal(1), at)
    gate.request(request(proposal(1), at), at)
    gate.propose(proposal(2, kind="exit"), at)
    gate.propose(proposal(3), at)
    gate.request(request(proposal(9), at), at)
    state = gate.state()
    assert state is not None and state.pending() and state.held and state.settled
    return state


def test_round_trip_of_a_real_state() -> None:
    state = real_state()
    data = encode_state(state)
    assert decode_state(data) == state
    assert orjson.loads(data)[0] == STATE_FORMAT_VERSION


@pytest.mark.parametrize("version", [0, 2, "1", None, True])
def test_unknown_versions_are_refused(version: object) -> None:
    with pytest.raises(UnsupportedStateVersion) as info:
        decode_state(orjson.dumps([version, "s", [], [], [], []]))
    assert isinstance(info.value, CoreError)
    assert "roll forward" in str(info.value)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not json",
        b"{}",
        b"[]",
        b'[1, "s", [], [], []]',
        b"[1, 5, [], [], [], []]",
        b'[1, "s", {}, [], [], []]',
        b'[1, "s", [["entry", "1", "number", "c", [1, 2]]], [], [], []]',
        b'[1, "s", [["entry", "1", "number"]], [], [], []]',
        b'[1, "s", [], [["c", "pending", "soon"]], [], []]',
        b'[1, "s", [], [], [["c", "analysis", null, 0, 0, 0]], []]',
        b'[1, "s", [], [], [], [["c", "entry", "accepted", 5, "1", 0]]]',
    ],
)
def test_malformed_records_are_refused(data: bytes) -> None:
    with pytest.raises(StateFormatError):
        decode_state(data)


def test_unknown_status_and_wrong_field_types_are_refused() -> None:
    record = orjson.loads(encode_state(real_state()))
    bad_status = orjson.loads(orjson.dumps(record))
    bad_status[3][0][1] = "exploded"
    with pytest.raises(StateFormatError):
        decode_state(orjson.dumps(bad_status))
    pending = next(t for t in record[2] if t[4] is not None)
    pending[4][0] = 7  # candidate_id must be a string
    with pytest.raises(StateFormatError):
        decode_state(orjson.dumps(record))
