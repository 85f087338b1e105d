"""What a store leaves in the block cache and on disk after a restore's compaction.

A restore writes level-0 files, whose index and filter pieces are cached as they are written,
and then compacts them all into new files (``PartitionStore.bulk_load``). The pieces of the
deleted files must leave the cache with them: otherwise half of a freshly restored
processor's cache holds pieces of files that no longer exist, and how full it is (its RSS)
depends on how the restore went rather than on what the store holds. Each case runs in a
fresh interpreter, because the block cache is the process's.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.fresh_interpreter import run_script

# 8 level-0 files of 20,000 admission changelog records (states of the example workflow and
# their timers), compacted when the bulk load ends; block cache usage while the level-0
# files exist and after the compaction, and what the store's files hold.
RESTORE = """
import json, sys
from pathlib import Path
from bench.changelog import admission_records
from streams.engine.store import PartitionStore

store = PartitionStore(Path(sys.argv[1]), fresh=True)
records = list(admission_records(160_000, far_future=True))
with store.bulk_load():
    for start in range(0, len(records), 20_000):
        batch = store.batch()
        for key, value in records[start:start + 20_000]:
            batch.put(key, value)
        store.write(batch)
        store.flush()
    level0 = store.level0_files()
    before = store.memory()["block_cache"]
after = store.memory()["block_cache"]
print(json.dumps({"level0": level0, "before": before, "after": after,
                  "left": store.level0_files(), "tables": store.tables(),
                  "raw": sum(len(k) + len(v or b"") for k, v in records)}))
store.close()
"""


@pytest.fixture(scope="module")
def restored(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("cache") / "store"
    result = run_script(RESTORE, str(path))
    assert result["level0"] == 8 and result["left"] == 0, result
    return result


def test_the_files_a_compaction_deleted_leave_the_block_cache(restored: dict[str, Any]) -> None:
    tables = restored["tables"]
    live = tables["index"] + tables["filter"]
    before, after = restored["before"], restored["after"]
    # The level-0 files' pieces were cached (so the case measures something) ...
    assert before >= 0.8 * live, restored
    # ... and after the compaction the cache holds at most the live files' pieces (RocksDB's
    # own charge per entry aside): not theirs and the deleted files' too.
    assert after <= 1.25 * live + 64 * 1024, restored


def test_alike_states_are_stored_in_large_compressed_blocks(restored: dict[str, Any]) -> None:
    tables, raw = restored["tables"], restored["raw"]
    # Admission states share most of their bytes, and LZ4 finds that only inside a block:
    # 32 KiB blocks store these records in under a twentieth of their size, 4 KiB blocks
    # in about a sixth.
    assert tables["entries"] == 160_000
    assert raw / tables["data_blocks"] >= 24 * 1024, tables
    assert tables["data"] <= raw / 12, (tables, raw)
