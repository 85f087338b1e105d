"""``sluicegate publish`` reads a line at most ``MAX_LINE_BYTES`` at a time."""

from __future__ import annotations

import io

from hypothesis import given
from hypothesis import strategies as st

from sluicegate.commands import publish
from sluicegate.commands.publish import MAX_LINE_BYTES, _lines


def test_lines_up_to_the_limit_are_read_and_longer_ones_counted() -> None:
    at_limit = b"a" * MAX_LINE_BYTES
    data = b"{}\n" + at_limit + b"\n" + b"b" * (MAX_LINE_BYTES + 1) + b"\n\n" + b"c" * 5
    assert list(_lines(io.BytesIO(data))) == [
        b"{}\n",
        at_limit + b"\n",
        MAX_LINE_BYTES + 1,
        b"\n",
        b"ccccc",
    ]
    assert list(_lines(io.BytesIO(b"d" * (3 * MAX_LINE_BYTES + 7)))) == [3 * MAX_LINE_BYTES + 7]


@given(st.lists(st.integers(0, 40)), st.booleans())
def test_every_line_is_read_or_counted_once(lengths: list[int], newline_at_end: bool) -> None:
    limit = publish.MAX_LINE_BYTES
    publish.MAX_LINE_BYTES = 16  # the same code, small lines
    try:
        text = b"\n".join(b"x" * n for n in lengths) + (b"\n" if newline_at_end else b"")
        read = list(_lines(io.BytesIO(text)))
    finally:
        publish.MAX_LINE_BYTES = limit
    pieces = text.split(b"\n")
    if pieces[-1] == b"":
        pieces.pop()
    assert [len(r.rstrip(b"\n")) if isinstance(r, bytes) else r for r in read] == [
        len(p) for p in pieces
    ]
    assert all(isinstance(r, bytes) == (len(p) <= 16) for r, p in zip(read, pieces, strict=True))
