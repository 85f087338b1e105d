"""Pages of a long list (``projections/pages.py``): parameters and where each page ends."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from projections.pages import PAGE_MAX, page, parse_from, parse_limit


@given(total=st.integers(0, 5000), limit=st.integers(1, PAGE_MAX))
def test_following_next_lists_every_position_once(total: int, limit: int) -> None:
    listed: list[int] = []
    start: int | None = 0
    while start is not None:
        shown = max(0, min(limit, total - start))
        listed += range(start, start + shown)
        start = page(start, limit, shown, total)["next"]
    assert listed == list(range(total))


def test_a_page_past_the_end_or_short_has_no_next() -> None:
    assert page(10, 5, 0, 3) == {"from": 10, "limit": 5, "next": None}
    assert page(0, 5, 3, 3)["next"] is None
    assert page(0, 5, 5, 5)["next"] is None
    assert page(0, 5, 5, 6)["next"] == 5


def test_parameters_are_ascii_digits_in_range() -> None:
    assert parse_from("0") == 0 and parse_from("999999") == 999999
    assert parse_limit("1") == 1 and parse_limit(str(PAGE_MAX)) == PAGE_MAX
    for bad in ("", "-1", "1.5", "²", "٣", " 1", "1e3", "9" * 4301):
        assert parse_from(bad) is None, bad
        assert parse_limit(bad) is None, bad
    assert parse_limit("0") is None
    assert parse_limit(str(PAGE_MAX + 1)) is None
