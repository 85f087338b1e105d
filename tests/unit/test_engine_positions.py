"""Input positions recorded with the state (``streams/engine/positions.py``)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streams.engine import positions

offsets = st.none() | st.integers(min_value=0, max_value=2**62)


@given(st.dictionaries(st.text(min_size=1, max_size=40), st.integers(0, 2**62), max_size=4))
def test_recorded_positions_read_back_as_written(written: dict[str, int]) -> None:
    assert positions.decode(positions.encode(written)) == written


def test_a_value_that_is_not_a_map_of_offsets_records_nothing() -> None:
    for value in (b"", b"not json", b"[1, 2]", b'"x"', b"\xff\xfe", None):
        assert positions.decode(value) == {}
    assert positions.decode(b'{"t": -1, "u": 1.5, "v": true, "w": "3", "x": 7}') == {"x": 7}


@given(offsets, offsets)
def test_consumption_resumes_at_the_furthest_known_position(
    committed: int | None, recorded: int | None
) -> None:
    known = [o for o in (committed, recorded) if o is not None]
    assert positions.resume_at(committed, recorded) == (max(known) if known else None)


ids = st.dictionaries(
    st.text(min_size=1, max_size=40), st.text(min_size=1, max_size=24), max_size=4
)


@given(ids)
def test_recorded_topic_ids_read_back_as_written(written: dict[str, str]) -> None:
    assert positions.decode_ids(positions.encode_ids(written)) == written


def test_a_value_that_is_not_a_map_of_ids_records_none() -> None:
    for value in (b"", b"not json", b"[1, 2]", b'"x"', b"\xff\xfe", None):
        assert positions.decode_ids(value) == {}
    assert positions.decode_ids(b'{"t": 1, "u": "", "v": null, "w": "AbC"}') == {"w": "AbC"}


def test_a_position_is_resumed_at_only_in_the_topic_it_was_read_in() -> None:
    assert positions.read_in("old-id", "old-id")
    assert not positions.read_in("old-id", "new-id")
    # Recorded before ids were, or a topic the broker did not describe: as before ids.
    assert positions.read_in(None, "new-id")
    assert positions.read_in("old-id", None)
