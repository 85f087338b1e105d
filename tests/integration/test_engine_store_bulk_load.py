"""A restore's bulk load: RocksDB compacts nothing while it writes, and everything once at the
end, so the store it leaves owes no compaction; its usual options return however it ends."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from streams.engine.rocks import LEVEL0_COMPACTION_TRIGGER, LEVEL0_STOP
from streams.engine.store import PartitionStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[PartitionStore]:
    opened = PartitionStore(tmp_path / "p0", fresh=True)
    yield opened
    opened.close()


def _write_file(store: PartitionStore, rng: random.Random, written: dict[bytes, bytes]) -> None:
    """One write batch of keys spread over the whole key range, flushed: one level-0 file
    that overlaps every other, as a changelog's do."""
    batch = store.batch()
    for _ in range(200):
        key = b"s/%08d" % rng.randrange(10**8)
        value = rng.randbytes(64)
        batch.put(key, value)
        written[key] = value
    store.write(batch)
    store.flush()


def _option(store: PartitionStore, name: str) -> str:
    """``name`` as the store's newest OPTIONS file states it (RocksDB writes one whenever
    its options change)."""
    files = sorted(store.path.glob("OPTIONS-*"), key=lambda p: int(p.name.split("-")[1]))
    found = re.search(rf"^\s*{name}=(\S+)$", files[-1].read_text(), re.MULTILINE)
    assert found is not None, f"{name} not in {files[-1]}"
    return found.group(1)


def _read_all(store: PartitionStore, written: dict[bytes, bytes]) -> None:
    for key, value in written.items():
        assert store.get(key.decode()) == value


def test_a_bulk_load_compacts_nothing_until_it_ends_and_leaves_nothing_to_compact(
    store: PartitionStore,
) -> None:
    rng, written = random.Random(1), dict[bytes, bytes]()
    assert _option(store, "disable_auto_compactions") == "false"
    with store.bulk_load():
        assert _option(store, "disable_auto_compactions") == "true"
        assert int(_option(store, "level0_stop_writes_trigger")) > LEVEL0_STOP
        for _ in range(LEVEL0_COMPACTION_TRIGGER + 3):
            _write_file(store, rng, written)
        # Automatically, the fourth file would have started a compaction of them all.
        assert store.level0_files() == LEVEL0_COMPACTION_TRIGGER + 3
        sequence = store.sequence()
    assert store.level0_files() == 0
    assert store.sequence() == sequence  # what a checkpoint records is unchanged
    assert _option(store, "disable_auto_compactions") == "false"
    assert int(_option(store, "level0_stop_writes_trigger")) == LEVEL0_STOP
    _read_all(store, written)


def test_a_bulk_load_compacts_whenever_its_level0_files_reach_its_limit(
    store: PartitionStore,
) -> None:
    rng, written = random.Random(2), dict[bytes, bytes]()
    with store.bulk_load(level0_files=3):
        for _ in range(3):
            _write_file(store, rng, written)
        assert store.level0_files() == 3
        _write_file(store, rng, written)  # compacts the three, then writes and flushes
        assert store.level0_files() == 1
    assert store.level0_files() == 1  # fewer than a compaction waits for: left as is
    _read_all(store, written)


def test_a_bulk_load_that_fails_gives_the_usual_options_back(store: PartitionStore) -> None:
    rng, written = random.Random(3), dict[bytes, bytes]()
    with pytest.raises(RuntimeError, match="broker gone"), store.bulk_load():
        _write_file(store, rng, written)
        raise RuntimeError("broker gone")
    assert _option(store, "disable_auto_compactions") == "false"
    assert int(_option(store, "level0_slowdown_writes_trigger")) < LEVEL0_STOP
    _read_all(store, written)
