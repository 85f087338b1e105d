"""A gap of input records that left retention unread, as a batch item (``streams/engine``).

The broker side (a partition stopped out of range, found again after an abort) is in
``tests/integration/test_engine_retention_gaps.py``; here, what the item commits and says.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from confluent_kafka import Message
from hypothesis import given
from hypothesis import strategies as st

from streams.engine.assignment import Assignment
from streams.engine.batch import Expired, Input, Isolated, Item, ProcessorStats
from streams.engine.deciding import Decider
from streams.engine.restore import Restorer

GAP = Expired("p.in", 2, 5, 9, "left retention unread: offsets 5 to 8 (4)")


def _input(partition: int, offset: int) -> Input:
    return Input(cast(Message, None), "p.in", partition, offset, "k", {"id": offset}, None)


def _assignment(offsets: dict[tuple[str, int], int]) -> Assignment:
    held = Assignment(cast(Restorer, None), ["p.in"], "p.changelog", Path("/nonexistent"), "t")
    held.offsets = dict(offsets)
    return held


def test_a_gap_names_its_partition_and_offsets_and_counts_them() -> None:
    assert GAP.origin() == "p.in[2]@5..8"
    assert GAP.offsets == 4
    moved_back = Expired("p.in", 0, 12, 0, "position 12 lies beyond the partition's end 3")
    assert moved_back.origin() == "p.in[0]@12"
    assert moved_back.offsets == 0


def test_a_committed_gap_moves_its_partition_past_it_isolated_or_not() -> None:
    held = _assignment({("p.in", 2): 5, ("p.in", 3): 40})
    assert held.offsets_after([GAP]) == {("p.in", 2): 9, ("p.in", 3): 40}
    isolated = Isolated(GAP, "the dead letter could not be written", bare=True)
    assert held.offsets_after([isolated])[("p.in", 2)] == 9


@given(
    st.lists(
        st.tuples(st.integers(0, 2), st.booleans(), st.integers(0, 10)),
        max_size=30,
    )
)
def test_each_partition_commits_the_position_after_its_last_item(
    steps: list[tuple[int, bool, int]],
) -> None:
    """Inputs and gaps in consumption order: a partition's offset after the batch is its
    last item's (an input's next offset, a gap's ``next``), whatever came before."""
    items: list[Item] = []
    expected = {("p.in", p): 0 for p in range(3)}
    position = dict(expected)
    for partition, is_gap, step in steps:
        tp = ("p.in", partition)
        if is_gap:
            items.append(Expired("p.in", partition, position[tp], position[tp] + step, "gap"))
            position[tp] += step
        else:
            items.append(_input(partition, position[tp] + step))
            position[tp] += step + 1
        expected[tp] = position[tp]
    assert _assignment({("p.in", p): 0 for p in range(3)}).offsets_after(items) == expected


def test_a_gap_is_one_dead_letter_and_counted_as_offsets_that_went() -> None:
    emitted: list[tuple[str, str, bytes | None, list[tuple[str, bytes]]]] = []

    def emit(
        topic: str, key: str, value: bytes | None, partition: int | None, headers: Any = None
    ) -> None:
        emitted.append((topic, key, value, headers))

    decider = Decider(cast(Any, None), {}, "p.dead-letters", emit, lambda: 3)
    assert decider.apply(GAP, now=0) == 0
    assert decider.apply(Isolated(GAP, "too big", bare=True), now=0) == 0
    assert [(t, k, v) for t, k, v, _ in emitted] == [("p.dead-letters", "", None)] * 2
    assert dict(emitted[0][3]) == {
        "sluicegate.reason": b"left retention unread: offsets 5 to 8 (4)",
        "sluicegate.origin": b"p.in[2]@5..8",
        "sluicegate.kind": b"unread",
    }
    isolated = dict(emitted[1][3])
    assert isolated["sluicegate.reason"] == b"left retention unread: offsets 5 to 8 (4); too big"
    assert isolated["sluicegate.kind"] == b"unread"  # the gap's kind: its offsets went unread
    moved = Expired("p.in", 0, 12, 0, "position 12 lies beyond the partition's end 3")
    decider.apply(moved, now=0)
    assert dict(emitted[2][3])["sluicegate.kind"] == b"moved"

    stats = ProcessorStats()
    stats.count([GAP, _input(2, 9), Isolated(GAP, "too big", bare=True)], events=0)
    assert (stats.records, stats.expired, stats.dead_letters, stats.isolated) == (1, 8, 2, 1)
