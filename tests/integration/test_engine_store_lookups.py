"""A lookup in a large store reads a few blocks, not a whole file's index
(``streams/engine/rocks.py``).

Every store charges its index and filter blocks to one block cache of
:data:`~streams.engine.rocks.BLOCK_CACHE_BYTES`. A file's index has one entry per data block,
and admission states compress about tenfold, so a compacted file of a few hundred thousand
states has an index of megabytes: larger than a cache shard, so it was never kept, and every
lookup of a stored key read and checked the whole index again (4.5 ms a lookup in a store of
5,000,000 records). Each case runs in a fresh interpreter (the block cache is the process's)
and counts the bytes the process read (``rchar`` of ``/proc/self/io``) over its lookups.
"""

from __future__ import annotations

import pytest

from tests.support.fresh_interpreter import run_script

# 400,000 states of about 850 bytes, alike but for their ids (they compress as admission
# states do), written and compacted into the bottom level the way a restore and RocksDB's
# own compactions leave a large store; then 500 stored keys and 500 absent ones looked up.
LOOKUPS = """
import json, random, sys
from pathlib import Path
from rocksdict import Rdict, WriteBatch
from streams.engine.rocks import NO_WAL, store_options

def rchar():
    with open("/proc/self/io") as io:
        return next(int(line.split()[1]) for line in io if line.startswith("rchar:"))

body = json.dumps({"stage": "admitted", "slots": ["a", "b", "c"], "pad": "x" * 700})
db = Rdict(sys.argv[1], options=store_options())
keys = [f"s/tradingview:btc-breakout:prod#evt-{n:09d}".encode() for n in range(400_000)]
random.Random(7).shuffle(keys)
for start in range(0, len(keys), 10_000):
    batch = WriteBatch(raw_mode=True)
    for key in keys[start:start + 10_000]:
        batch.put(key, (body + key.decode()).encode())
    db.write(batch, NO_WAL)
db.flush(True)
db.compact_range(None, None)
stored = random.Random(8).sample(keys, 500)
before = rchar()
found = sum(db.get(key) is not None for key in stored)
stored_bytes = rchar() - before
before = rchar()
absent = sum(db.get(f"s/nobody#{n}".encode()) is None for n in range(500))
absent_bytes = rchar() - before
index = db.property_value("rocksdb.aggregated-table-properties")
db.close()
print(json.dumps({"found": found, "absent": absent, "stored_bytes": stored_bytes,
                  "absent_bytes": absent_bytes, "properties": index}))
"""


@pytest.fixture(scope="module")
def lookups(tmp_path_factory: pytest.TempPathFactory) -> dict[str, int | str]:
    path = tmp_path_factory.mktemp("lookups") / "store"
    result = run_script(LOOKUPS, str(path))
    assert result["found"] == 500 and result["absent"] == 500
    return result


def test_looking_up_a_stored_key_reads_a_few_blocks_not_a_whole_index(
    lookups: dict[str, int | str],
) -> None:
    # A data block (4 KiB) and, when not cached, an index and a filter partition of about
    # 4 KiB each; before, each lookup read the file's whole index (more than a MiB here).
    per_lookup = int(lookups["stored_bytes"]) / 500
    assert per_lookup < 32 * 1024, (per_lookup, lookups["properties"])


def test_looking_up_an_absent_key_reads_at_most_a_filter_partition(
    lookups: dict[str, int | str],
) -> None:
    per_lookup = int(lookups["absent_bytes"]) / 500
    assert per_lookup < 16 * 1024, (per_lookup, lookups["properties"])
