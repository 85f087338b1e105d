"""The pure part of noticing a share nobody projects (projections/siblings.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from projections.share import Share
from projections.siblings import CHECK_EVERY_S, STALLED_AFTER_S, SiblingWatch

ENDS = {("runs", p): 100 for p in range(4)}


def test_a_partition_stuck_behind_its_end_stalls_its_share_after_the_window() -> None:
    watch = SiblingWatch(Share(0, 2))
    stored = {("runs", 0): 100, ("runs", 2): 100, ("runs", 1): 40}  # runs[3]: never stored
    assert watch.observe(0.0, stored, ENDS) == []
    assert watch.observe(STALLED_AFTER_S - 1, stored, ENDS) == [] and watch.stalled == []
    [warning] = watch.observe(STALLED_AFTER_S, stored, ENDS)
    assert watch.labels() == ["1/2"]
    assert "runs[1], runs[3] stayed 160 messages behind" in warning
    assert "`sluicegate projector --share 1/2` running?" in warning
    # Said once per window, listed while it lasts.
    assert watch.observe(STALLED_AFTER_S + 1, stored, ENDS) == [] and watch.labels() == ["1/2"]
    assert len(watch.observe(2 * STALLED_AFTER_S, stored, ENDS)) == 1


def test_a_share_that_moves_or_has_caught_up_is_not_stalled() -> None:
    watch = SiblingWatch(Share(0, 2))
    watch.observe(0.0, {("runs", 1): 40, ("runs", 3): 100}, ENDS)
    # runs[1] moved (slowly): its window starts again.
    assert watch.observe(STALLED_AFTER_S, {("runs", 1): 41, ("runs", 3): 100}, ENDS) == []
    caught_up = {("runs", 1): 100, ("runs", 3): 100}
    assert watch.observe(2 * STALLED_AFTER_S, caught_up, ENDS) == [] and watch.stalled == []
    # An empty partition nobody stored an offset for is not behind.
    assert watch.observe(3 * STALLED_AFTER_S, {}, {("runs", 1): 0}) == []


def test_checks_are_due_once_per_interval() -> None:
    watch = SiblingWatch(Share(1, 3))
    assert watch.due(0.0)
    watch.observe(10.0, {}, {})
    assert not watch.due(10.0 + CHECK_EVERY_S - 1) and watch.due(10.0 + CHECK_EVERY_S)


@given(
    count=st.integers(2, 5),
    index=st.integers(0, 4),
    stuck=st.lists(st.integers(0, 99), min_size=12, max_size=12),
    steps=st.integers(1, 8),
)
def test_only_other_shares_stuck_partitions_are_reported(
    count: int, index: int, stuck: list[int], steps: int
) -> None:
    """Partitions of the watcher's own share are never reported, however stuck; the others
    are reported by their share exactly when they sat still behind their end long enough."""
    share = Share(index % count, count)
    watch = SiblingWatch(share)
    ends = {("t", p): 100 for p in range(12)}
    # Even partitions sit still at their offset; odd ones move one offset every step.
    for i in range(steps + 1):
        stored = {("t", p): stuck[p] if p % 2 == 0 else min(i + p, 99) for p in range(12)}
        watch.observe(i * STALLED_AFTER_S, stored, ends)
    expected = sorted(
        {p % count for p in range(0, 12, 2) if p % count != share.index and stuck[p] < 100}
    )
    assert watch.stalled == expected
