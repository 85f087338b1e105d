"""The RocksDB options of every partition store, explicit so that memory stays bounded.

RocksDB's defaults grow with the data: index and filter blocks of every SST file are held on
the heap outside any cache (``cache_index_and_filter_blocks=false``) and every file stays open
(``max_open_files=-1``), so memory rises with the number of files, i.e. with the state. Here
every store of a process shares one budget:

* **Block cache** (:data:`BLOCK_CACHE_BYTES`, one LRU cache per process): data blocks *and*
  index and filter blocks are charged to it (level-0 ones pinned), so reads never hold more.
* **Partitioned index and filters** (:data:`METADATA_BLOCK_BYTES` per partition, the small
  top level of each file pinned): a lookup reads one index and one filter partition, not a
  file's whole index. A file's index has an entry per data block, and admission states
  compress about tenfold, so a compacted 64 MiB file had an index of about 4.6 MiB: larger
  than a cache shard (the 32 MiB cache has 64 of 512 KiB), so it was never kept, and every
  lookup of a stored key read and checked it again. Measured on 5,000,000 admission records
  (2 cores): 4.5 ms a lookup of a stored key and 0.23 ms of an absent one before, 6 to 15
  us and 1.5 us with partitions (``tests/integration/test_engine_store_lookups.py`` counts
  the bytes a lookup reads).
* **Memtables** (:data:`MEMTABLE_BYTES` each, at most :data:`MEMTABLES` per store), and one
  write-buffer manager per process caps all stores' memtables together at
  :data:`WRITE_BUFFERS_BYTES` (a full one is flushed early rather than stalling writes).
* **Open files**: at most :data:`MAX_OPEN_FILES` per store.
* **Level 0**: compaction starts at :data:`LEVEL0_COMPACTION_TRIGGER` files, writes slow
  down at :data:`LEVEL0_SLOWDOWN` and stop at :data:`LEVEL0_STOP` (RocksDB's defaults, set
  here because a bulk load lifts them: :data:`BULK_LOAD`).
* **Data blocks of 32 KiB** (:data:`DATA_BLOCK_BYTES`, RocksDB's default is 4 KiB): states
  of one workflow are alike, and LZ4 finds what they share only inside a block. Measured on
  1,000,000 admission records: 75 MB of data blocks and a 6.5 MB index with 4 KiB blocks,
  18 MB and 0.9 MB with 32 KiB ones, and a restore writes and compacts that much less. The
  cost: a lookup that misses the cache decompresses 32 KiB, not 4 (random stored keys, one
  thread: 5.9 against 4.5 us with 1,000,000 records, 7.9 against 9.1 us with 5,000,000,
  whose smaller files stay in the page cache). Files written with another block size stay
  readable; compactions rewrite them.
* **Blocks of deleted files leave the cache** (:data:`UNCACHE_AGGRESSIVENESS`): a compaction
  deletes its input files, but RocksDB leaves their cached blocks in the cache until the LRU
  pushes them out, and level-0 files' index and filter pieces are cached as they are written.
  After a restore (every level-0 file compacted once) half of the cache held pieces of files
  that no longer existed: 4.4 MiB for 1,000,000 records (32 KiB blocks) where the live
  files' pieces took 2.2 MiB (``tests/integration/test_engine_store_cache.py``).
* Bloom filters (10 bits per key) so that looking up a key that was never admitted (most
  deliveries) rarely reads a block; LZ4 compression.

**No write-ahead log** (:data:`NO_WAL`): the store is a cache of the changelog, trusted after
a restart only when a checkpoint says what it holds (``checkpoint.py``); a checkpoint is
written only after the memtables were flushed to SST files, and without one the store is
wiped and restored. A WAL would protect nothing and cost a checksum and a write per record.

Memory per process is therefore about ``BLOCK_CACHE_BYTES + WRITE_BUFFERS_BYTES`` plus a few
MiB per open store, whatever the number of records. The first store of a process also fixes
glibc's mmap threshold (``heap.py``), so the large buffers of compactions and fetches are
returned to the system when freed instead of staying in malloc's arenas, and every open
store holds ``heap.RELEASE``, which returns the smaller blocks they free every second. To
trade memory for read speed, change these constants (they are not settings: a store's memory
should not be tuned by accident).
"""

from __future__ import annotations

import threading

from rocksdict import (
    BlockBasedIndexType,
    BlockBasedOptions,
    Cache,
    DBCompressionType,
    Options,
    WriteBufferManager,
    WriteOptions,
)

from streams.engine.heap import map_large_blocks

MiB = 1024 * 1024
BLOCK_CACHE_BYTES = 32 * MiB
MEMTABLE_BYTES = 16 * MiB
MEMTABLES = 2
WRITE_BUFFERS_BYTES = 64 * MiB
MAX_OPEN_FILES = 256
METADATA_BLOCK_BYTES = 4096
DATA_BLOCK_BYTES = 32 * 1024
UNCACHE_AGGRESSIVENESS = 300
"""How hard RocksDB tries to erase a deleted file's blocks from the cache (its
``uncache_aggressiveness``; 0, its default, leaves them to the LRU): at 300 it keeps erasing
while at least about 5% of its attempts find a block, and always erases the pinned ones."""
LEVEL0_COMPACTION_TRIGGER = 4
LEVEL0_SLOWDOWN = 20
LEVEL0_STOP = 36

BULK_LEVEL0_FILES = MAX_OPEN_FILES
"""Level-0 files a bulk load lets pile up before it compacts them all at once (a compaction
reads every input file together, so at most what a store may keep open)."""

BULK_LOAD = {
    "disable_auto_compactions": "true",
    "level0_slowdown_writes_trigger": str(2 * BULK_LEVEL0_FILES),
    "level0_stop_writes_trigger": str(4 * BULK_LEVEL0_FILES),
}
"""Options while a store is bulk-loaded (``PartitionStore.bulk_load``): nothing is compacted
until the load says so, and writes are never slowed or stopped for level-0 files meanwhile.
Changelog records arrive in offset order, not key order, so every level-0 file spans every
key, and each automatic compaction of a few of them merged them with every file of the level
below, again and again: 5,000,000 records restored in 21.1 to 26.5 s that way and in 14.8
to 17.7 s with one compaction at the end (alternated runs on one changelog, 2026-12-05, 2
cores)."""

USUAL = {
    "disable_auto_compactions": "false",
    "level0_slowdown_writes_trigger": str(LEVEL0_SLOWDOWN),
    "level0_stop_writes_trigger": str(LEVEL0_STOP),
}
"""The options :data:`BULK_LOAD` changes, as :func:`store_options` sets them."""

ON_OPEN = {"uncache_aggressiveness": str(UNCACHE_AGGRESSIVENESS)}
"""Options rocksdict's ``Options`` cannot set: a store sets them on opening (they are mutable,
so ``Rdict.set_options`` applies them before the first write)."""

_shared: tuple[Cache, WriteBufferManager] | None = None
_lock = threading.Lock()


def _budget() -> tuple[Cache, WriteBufferManager]:
    """The process's block cache and write-buffer manager, shared by every store."""
    global _shared  # noqa: PLW0603 - one budget per process is the point
    with _lock:
        if _shared is None:
            map_large_blocks()  # before the first store allocates anything: see heap.py
            _shared = (Cache(BLOCK_CACHE_BYTES), WriteBufferManager(WRITE_BUFFERS_BYTES, False))
        return _shared


def store_options() -> Options:
    """Options for one partition store (raw bytes keys and values)."""
    cache, buffers = _budget()
    table = BlockBasedOptions()
    table.set_block_cache(cache)
    table.set_cache_index_and_filter_blocks(True)
    table.set_pin_l0_filter_and_index_blocks_in_cache(True)
    table.set_block_size(DATA_BLOCK_BYTES)
    table.set_bloom_filter(10, False)
    table.set_index_type(BlockBasedIndexType.two_level_index_search())
    table.set_partition_filters(True)
    table.set_metadata_block_size(METADATA_BLOCK_BYTES)
    table.set_pin_top_level_index_and_filter(True)
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    options.set_block_based_table_factory(table)
    options.set_write_buffer_size(MEMTABLE_BYTES)
    options.set_max_write_buffer_number(MEMTABLES)
    options.set_write_buffer_manager(buffers)
    options.set_max_open_files(MAX_OPEN_FILES)
    options.set_level_zero_file_num_compaction_trigger(LEVEL0_COMPACTION_TRIGGER)
    options.set_level_zero_slowdown_writes_trigger(LEVEL0_SLOWDOWN)
    options.set_level_zero_stop_writes_trigger(LEVEL0_STOP)
    options.set_compression_type(DBCompressionType.lz4())
    options.set_max_background_jobs(2)
    options.set_keep_log_file_num(2)
    return options


def no_wal() -> WriteOptions:
    """Write options for every store write: no write-ahead log (see the module docstring)."""
    options = WriteOptions()
    # rocksdict's stub declares a method; the extension has a property (checked: a write
    # with this option is gone after kill -9, a default write survives it).
    options.disable_wal = True  # type: ignore[assignment,method-assign]
    return options


NO_WAL = no_wal()
