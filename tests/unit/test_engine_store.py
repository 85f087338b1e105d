"""The partition store's key layout (timers sort by due time, whatever the due time) and
what it raises when RocksDB or the filesystem refuses."""

from __future__ import annotations

import logging
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from streams.engine.store import PartitionStore, parse_timer_key, timer_key
from streams.errors import StateStoreFailed

NOW = 1_796_040_000_000  # 2026-11-30
MAX_DUE_MS = 9_999_999_999_999  # the largest due time of 13 digits (year 2286)


def test_existing_keys_keep_their_format() -> None:
    assert timer_key(NOW, "a/b") == "t/1796040000000/a/b"
    assert parse_timer_key("t/1796040000000/a/b") == (NOW, "a/b")
    assert timer_key(-5, "k") == "t/0000000000000/k"


def test_a_due_time_past_year_2286_is_clamped_not_overflowed() -> None:
    far = 10**13 + 7  # 13 digits overflow here: "t/10000000000007/k" sorts before "t/17..."
    assert timer_key(far, "k") == f"t/{MAX_DUE_MS}/k"
    assert timer_key(far, "k") > timer_key(NOW, "\uffff")


@given(st.integers(-(10**3), 3 * 10**13), st.integers(0, 3 * 10**13))
@example(2 * 10**12, 10**13 + 1)
def test_timer_keys_sort_as_their_due_times(first: int, second: int) -> None:
    def clamp(due: int) -> int:
        return min(max(due, 0), MAX_DUE_MS)

    if clamp(first) < clamp(second):
        assert timer_key(first, "k") < timer_key(second, "k")


def test_a_far_future_timer_is_never_due(tmp_path: Path) -> None:
    store = PartitionStore(tmp_path / "p0", fresh=True)
    try:
        store.put(timer_key(10**14, "far"), b"")
        store.put(timer_key(NOW - 1, "near"), b"")
        store.apply()
        assert store.due_timers(NOW, 10) == [(timer_key(NOW - 1, "near"), "near")]
    finally:
        store.close()


def test_a_state_directory_that_cannot_hold_a_store_is_named_with_what_to_do(
    tmp_path: Path,
) -> None:
    (tmp_path / "state").write_text("a file where the state directory should be")
    with pytest.raises(StateStoreFailed) as failed:
        PartitionStore(tmp_path / "state" / "p0", fresh=True)
    message = str(failed.value)
    assert f"the state store {tmp_path / 'state' / 'p0'} failed opening" in message
    assert "SLUICEGATE_STATE_DIR" in message


def test_writes_a_store_cannot_make_fail_with_its_name_and_abandoning_it_does_not_raise(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """RocksDB's own errors (rocksdict raises them as bare ``Exception``) are translated, so
    the instance stops with one line that names the store; dropping the store afterwards
    (no checkpoint is left) logs what closing met instead of raising it over that line."""
    store = PartitionStore(tmp_path / "p0", fresh=True)
    store.put("s/a", b"committed")
    store.apply()
    shutil.rmtree(tmp_path / "p0")  # the files gone from under it, as a full disk refuses new ones
    with pytest.raises(StateStoreFailed, match="failed flushing"):
        store.flush()
    store.put("s/b", b"committed after")
    named = re.escape(f"the state store {tmp_path / 'p0'} failed writing")
    with pytest.raises(StateStoreFailed, match=named):
        store.apply()
    with caplog.at_level(logging.WARNING, logger="sluicegate.processor"):
        store.abandon()
    assert "failed closing" in caplog.text
    store.abandon()  # a second time does nothing
