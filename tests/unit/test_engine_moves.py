"""A move to an input topic created again, as a batch item (``streams/engine/assignment.py``).

The broker side (a topic deleted, created again and grown past the recorded position) is in
``tests/integration/test_engine_recreated_topics.py``; here, how the move is kept until a
transaction commits it, and given up with its partition.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

from confluent_kafka import TopicPartition

from streams.engine import positions
from streams.engine.assignment import Assignment
from streams.engine.batch import Expired, ProcessorStats
from streams.engine.restore import Restorer
from streams.engine.store import PartitionStore

MOVE = Expired("p.in", 1, 7, 0, "the topic was deleted and created again")


def _held() -> Assignment:
    held = Assignment(cast(Restorer, None), ["p.in"], "p.changelog", Path("/nonexistent"), "t")
    held.offsets = {("p.in", 1): 0, ("p.in", 2): 4}
    held.moved = [MOVE]
    return held


def test_a_move_leads_the_next_batch_until_a_transaction_commits_it() -> None:
    held = _held()
    assert held.take_moved() == [MOVE]
    held.discard()  # the batch's transaction aborted
    assert held.take_moved() == [MOVE]
    assert held.offsets_after([MOVE]) == {("p.in", 1): 0, ("p.in", 2): 4}
    held.committed(held.offsets_after([MOVE]))
    assert held.take_moved() == []
    held.discard()
    assert held.take_moved() == []


def test_a_batch_that_neither_committed_nor_aborted_keeps_its_move() -> None:
    held = _held()
    assert held.take_moved() == [MOVE]
    assert held.take_moved() == [MOVE]  # taken again, not twice


def test_a_move_goes_with_its_partition() -> None:
    held = _held()
    held.take_moved()
    held.revoke([TopicPartition("p.in", 1)], ProcessorStats())
    held.discard()
    assert held.take_moved() == []


class _Recorded:
    """What a restored store holds of the engine's metadata (``m/offsets``, ``m/topic-ids``)."""

    def __init__(self, offsets: dict[str, int], ids: dict[str, str] | None) -> None:
        self.meta = {positions.OFFSETS_KEY: positions.encode(offsets)}
        if ids is not None:
            self.meta[positions.TOPIC_IDS_KEY] = positions.encode_ids(ids)

    def get(self, key: str) -> bytes | None:
        return self.meta.get(key)


def _restored(stores: dict[int, _Recorded], ids: dict[str, str]) -> Assignment:
    held = Assignment(cast(Restorer, None), ["p.in"], "p.changelog", Path("/nonexistent"), "t")
    held.stores = cast(dict[int, PartitionStore], stores)
    held.topic_ids = ids
    return held


def test_a_position_read_in_a_topic_before_resumes_at_the_start_whatever_the_group_has() -> None:
    held = _restored(
        {
            0: _Recorded({"p.in": 9}, {"p.in": "old"}),  # read in the topic before
            1: _Recorded({"p.in": 4}, {"p.in": "new"}),  # read in this one
            2: _Recorded({"p.in": 6}, None),  # recorded before ids were: trusted as before
        },
        {"p.in": "new"},
    )
    committed = {("p.in", 0): 9, ("p.in", 1): 2, ("p.in", 2): None}
    resumed, elsewhere = held._resume(committed)
    assert resumed == {("p.in", 0): None, ("p.in", 1): 4, ("p.in", 2): 6}
    assert elsewhere == {("p.in", 0): (9, "old")}
    assert held.ids_unrecorded == {0, 2}  # the first transaction records "new" there

    held.offsets = {("p.in", 0): 0, ("p.in", 1): 4, ("p.in", 2): 6}
    held._record_moves(elsewhere, committed)
    (move,) = held.take_moved()
    assert move.origin() == "p.in[0]@9"
    assert move.next == 0
    assert "topic id old then, new now" in move.reason
    assert move.reason.endswith(
        "read from its start, offset 0, not from the group's offset 9 there"
    )
