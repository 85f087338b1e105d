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
