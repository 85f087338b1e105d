"""How a rebuild splits its load among workers: :class:`~projections.share.Share` and
:func:`~projections.parallel_load.auto_workers` (no IO)."""

from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from projections.parallel_load import MAX_WORKERS, PARALLEL_FROM, auto_workers
from projections.share import Share


@given(
    count=st.integers(1, 16),
    partitions=st.lists(st.tuples(st.sampled_from(["runs", "tasks"]), st.integers(0, 63))),
)
def test_every_partition_is_in_exactly_one_share(
    count: int, partitions: list[tuple[str, int]]
) -> None:
    for tp in partitions:
        assert sum(tp in Share(i, count) for i in range(count)) == 1


def test_a_keys_partition_number_is_in_the_same_share_in_every_topic() -> None:
    share = Share(1, 3)
    assert ("runs", 4) in share and ("tasks", 4) in share and ("workflows", 4) in share
    assert ("runs", 5) not in share


@pytest.mark.parametrize("index,count", [(-1, 2), (2, 2), (0, 0)])
def test_a_share_that_does_not_exist_is_refused(index: int, count: int) -> None:
    with pytest.raises(ValueError, match="does not exist"):
        Share(index, count)


def _goal(partitions: int, per_partition: int) -> dict[tuple[str, int], int]:
    return {("runs", p): per_partition for p in range(partitions)}


def test_a_small_load_stays_in_one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    assert auto_workers(_goal(6, (PARALLEL_FROM - 1) // 6)) == 1
    assert auto_workers({}) == 1


@pytest.mark.parametrize(
    "cores,partitions,expected",
    [(2, 6, 2), (16, 6, 6), (16, 64, MAX_WORKERS), (None, 6, 1), (4, 1, 1)],
)
def test_a_large_load_takes_a_worker_per_core_and_partition_number(
    monkeypatch: pytest.MonkeyPatch, cores: int | None, partitions: int, expected: int
) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    assert auto_workers(_goal(partitions, PARALLEL_FROM)) == expected


@pytest.mark.parametrize(
    "text,share", [("0/2", Share(0, 2)), (" 3/4 ", Share(3, 4)), ("0/1", Share(0, 1))]
)
def test_a_share_is_written_k_of_n(text: str, share: Share) -> None:
    assert Share.parse(text) == share
    assert Share.parse(str(share)) == share


@pytest.mark.parametrize(
    "text", ["2/2", "-1/2", "1/0", "1", "a/b", "1/2/3", "", "/", "\u00b2/3", "0/" + "9" * 5000]
)
def test_a_share_written_otherwise_is_refused_with_the_form_expected(text: str) -> None:
    with pytest.raises(ValueError, match="expected K/N with 0 <= K < N"):
        Share.parse(text)
