"""State of one input partition: RocksDB (rocksdict) plus a write buffer for the open batch.

Keys are ``s/<state key>`` for an aggregate's encoded state, ``t/<due ms, 13 digits>/<state
key>`` for its next timer and ``m/<name>`` for the engine's own metadata (``m/partitions``: the
partition count the changelog partition was written with; ``m/offsets``: the input positions
its state was committed with, ``positions.py``). Writes go to the buffer while a
Kafka transaction is open; they reach RocksDB only after that transaction committed
(:meth:`apply`), and an aborted transaction simply :meth:`discard`\\ s them. So RocksDB holds
committed state only, and the buffer is what the changelog records of the open transaction
carry.

RocksDB runs with the explicit options of ``rocks.py`` (bounded memory, no write-ahead log):
what the store holds survives a restart only through :meth:`flush` and a checkpoint
(``checkpoint.py``); a store opened without a valid checkpoint is wiped.

Whatever RocksDB refuses (a full or read-only filesystem, an I/O error) is raised as
:class:`~streams.errors.StateStoreFailed`, naming the store and what to do, and the instance
stops. A full disk shows first in a memtable flush, which then fails every write after it;
a write that fails is one of a transaction that already committed, so the store lacks what
the changelog holds, and only a restore from the changelog makes them agree again.
"""

from __future__ import annotations

import logging
import re
import shutil
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from rocksdict import Rdict, WriteBatch

from streams.engine.heap import RELEASE
from streams.engine.rocks import (
    BULK_LEVEL0_FILES,
    BULK_LOAD,
    LEVEL0_COMPACTION_TRIGGER,
    NO_WAL,
    ON_OPEN,
    USUAL,
    store_options,
)
from streams.errors import StateStoreFailed

log = logging.getLogger("sluicegate.processor")

STATE_PREFIX = "s/"
TIMER_PREFIX = "t/"
META_PREFIX = "m/"
PARTITIONS_KEY = META_PREFIX + "partitions"
_DUE_WIDTH = 13
MAX_DUE_MS = 10**_DUE_WIDTH - 1
"""The latest due time a timer key can hold (year 2286); later ones are clamped to it, so a
key never outgrows its width and sorts before the present (it would fire on every batch)."""

_clamped_once = False


def state_key(key: str) -> str:
    return STATE_PREFIX + key


def timer_key(due_ms: int, key: str) -> str:
    """``t/<due>/<key>``, ``due`` zero-padded to 13 digits and clamped to ``[0, MAX_DUE_MS]``."""
    if due_ms > MAX_DUE_MS:
        _warn_clamped(due_ms, key)
        due_ms = MAX_DUE_MS
    return f"{TIMER_PREFIX}{max(due_ms, 0):0{_DUE_WIDTH}d}/{key}"


def _warn_clamped(due_ms: int, key: str) -> None:
    global _clamped_once  # noqa: PLW0603 - one warning per process is the point
    if not _clamped_once:
        _clamped_once = True
        log.warning(
            "timer for %s due at %d ms is past year 2286; kept at %d (logged once)",
            key,
            due_ms,
            MAX_DUE_MS,
        )


_TABLE_PROPERTIES = {
    "entries": "# entries",
    "data_blocks": "# data blocks",
    "data": "data block size",
    "index": "index block size",
    "filter": "filter block size",
}


def _table_property(text: str, label: str) -> int:
    """``label``'s number in RocksDB's ``key=value; ...`` table properties (the index's label
    goes on with its format, in parentheses); 0 if absent."""
    found = re.search(rf"(?:^|; ){re.escape(label)}(?: \([^)]*\))?=(\d+)", text)
    return int(found.group(1)) if found else 0


def parse_timer_key(store_key: str) -> tuple[int, str]:
    due, _, key = store_key[len(TIMER_PREFIX) :].partition("/")
    return int(due), key


class PartitionStore:
    """One partition's committed state in RocksDB and the open batch's writes in memory."""

    def __init__(self, path: Path, *, fresh: bool) -> None:
        """Open the store at ``path``; ``fresh`` wipes whatever an earlier owner left there."""
        self.path = path
        try:
            if fresh and path.exists():
                shutil.rmtree(path)
            path.mkdir(parents=True, exist_ok=True)
            self._db = Rdict(str(path), options=store_options())
            self._db.set_options(ON_OPEN)
        except Exception as e:  # rocksdict raises Exception itself, with RocksDB's message
            raise self._failed("opening", e) from e
        self._buffer: dict[str, bytes | None] = {}
        self._bulk_level0_files = 0
        """While a bulk load runs, the level-0 files at which :meth:`write` compacts (else 0)."""
        self._open = True
        RELEASE.hold()  # RocksDB's threads free memory from now on: see heap.py

    def get(self, store_key: str) -> bytes | None:
        if store_key in self._buffer:
            return self._buffer[store_key]
        try:
            value = self._db.get(store_key.encode())
        except Exception as e:
            raise self._failed("reading", e) from e
        assert value is None or isinstance(value, bytes)
        return value

    def put(self, store_key: str, value: bytes | None) -> None:
        """Buffer a write (``None`` deletes); it reaches RocksDB on :meth:`apply`."""
        self._buffer[store_key] = value

    def pending(self) -> dict[str, bytes | None]:
        return self._buffer

    def apply(self) -> None:
        """Make the buffered writes durable locally; call only after the transaction committed."""
        if not self._buffer:
            return
        self.restore_batch(self._buffer.items())
        self._buffer = {}

    def discard(self) -> None:
        """Forget the buffered writes of an aborted transaction."""
        self._buffer = {}

    def restore_batch(self, items: Iterable[tuple[str, bytes | None]]) -> None:
        """Write (key, value-or-None) pairs straight to RocksDB."""
        batch = WriteBatch(raw_mode=True)
        for key, value in items:
            if value is None:
                batch.delete(key.encode())
            else:
                batch.put(key.encode(), value)
        self.write(batch)

    @staticmethod
    def batch() -> WriteBatch:
        """An empty batch of raw (bytes) writes for :meth:`write` (the restore's bulk path)."""
        return WriteBatch(raw_mode=True)

    def write(self, batch: WriteBatch) -> None:
        """Write ``batch`` to RocksDB at once (no write-ahead log, see ``rocks.py``); in a
        bulk load, compact first once its level-0 files have piled up to its limit."""
        if self._bulk_level0_files and self.level0_files() >= self._bulk_level0_files:
            self.compact()
        try:
            self._db.write(batch, NO_WAL)
        except Exception as e:
            raise self._failed("writing", e) from e

    @contextmanager
    def bulk_load(self, level0_files: int = BULK_LEVEL0_FILES) -> Iterator[None]:
        """Write inside as one bulk load (a restore), then leave nothing to compact.

        Inside, RocksDB compacts nothing by itself and never slows or stops writes for its
        level-0 files (``rocks.BULK_LOAD``); :meth:`write` compacts everything whenever
        ``level0_files`` have piled up. Leaving normally, if ``LEVEL0_COMPACTION_TRIGGER``
        level-0 files or more are left (:meth:`flush` first to count what the memtables
        hold), the whole store is compacted before the usual options return: the store is
        then at least as compact as automatic compactions would have left it, and none
        runs after (while deciding, or while memory is measured). Leaving on an error, the
        usual options return at once and RocksDB compacts in the background, as after any
        writes.
        """
        self._db.set_options(BULK_LOAD)
        self._bulk_level0_files = level0_files
        try:
            yield
            if self.level0_files() >= LEVEL0_COMPACTION_TRIGGER:
                self.compact()
        finally:
            self._bulk_level0_files = 0
            self._db.set_options(USUAL)

    def level0_files(self) -> int:
        """How many SST files level 0 holds (each one of a memtable flush)."""
        return int(self._db.property_int_value("rocksdb.num-files-at-level0") or 0)

    def compact(self) -> None:
        """Compact the whole store now (waits for it)."""
        try:
            self._db.compact_range(None, None)
        except Exception as e:
            raise self._failed("compacting", e) from e

    def flush(self) -> int:
        """Flush the memtables to SST files and wait; the sequence number they end at.

        After this, closing and reopening the store finds exactly what it holds now, and
        :meth:`sequence` of the reopened store returns the same number (a checkpoint records
        it, so a store that lost unflushed writes is recognised).
        """
        try:
            self._db.flush(True)
        except Exception as e:
            raise self._failed("flushing", e) from e
        return self.sequence()

    def sequence(self) -> int:
        """RocksDB's latest sequence number (every write advances it)."""
        return int(self._db.latest_sequence_number())

    def memory(self) -> dict[str, int]:
        """RocksDB's own memory figures for this store, in bytes (for operators and tests)."""
        names = {
            "memtables": "rocksdb.cur-size-all-mem-tables",
            "table_readers": "rocksdb.estimate-table-readers-mem",
            "block_cache": "rocksdb.block-cache-usage",
            "pinned": "rocksdb.block-cache-pinned-usage",
        }
        return {name: int(self._db.property_int_value(p) or 0) for name, p in names.items()}

    def tables(self) -> dict[str, int]:
        """What the store's live SST files hold, from their table properties: ``entries``,
        ``data_blocks``, and the bytes of their ``data``, ``index`` and ``filter`` blocks (the
        last two are what the block cache holds so that lookups do not read them)."""
        text = self._db.property_value("rocksdb.aggregated-table-properties") or ""
        return {name: _table_property(text, label) for name, label in _TABLE_PROPERTIES.items()}

    def due_timers(self, now_ms: int, limit: int) -> list[tuple[str, str]]:
        """Committed timers due by ``now_ms``: (timer store key, state key), oldest first."""
        bound = timer_key(now_ms, "\uffff")
        due: list[tuple[str, str]] = []
        for raw in self._db.keys(from_key=TIMER_PREFIX.encode()):
            store_key = _text(raw)
            if not store_key.startswith(TIMER_PREFIX) or store_key > bound:
                break
            due.append((store_key, parse_timer_key(store_key)[1]))
            if len(due) >= limit:
                break
        return due

    def items(self, prefix: str = STATE_PREFIX) -> Iterator[tuple[str, bytes]]:
        """Committed (key, value) pairs whose key starts with ``prefix``, in key order."""
        for raw, value in self._db.items(from_key=prefix.encode()):
            key = _text(raw)
            if not key.startswith(prefix):
                break
            assert isinstance(value, bytes)
            yield key, value

    def count(self, prefix: str = STATE_PREFIX) -> int:
        total = 0
        for raw in self._db.keys(from_key=prefix.encode()):
            if not _text(raw).startswith(prefix):
                break
            total += 1
        return total

    def close(self) -> None:
        """Close RocksDB (a second call does nothing); :class:`StateStoreFailed` if RocksDB
        could not write what closing writes (the store is closed all the same)."""
        if not self._open:
            return
        self._open = False
        try:
            self._db.close()
        except Exception as e:
            raise self._failed("closing", e) from e
        finally:
            RELEASE.let_go()

    def abandon(self) -> None:
        """Close a store that is dropped without a checkpoint (a lost partition, an instance
        stopping on an error): its next owner wipes it and restores it in full, so a failure
        to close is logged, not raised over the error that got here."""
        try:
            self.close()
        except StateStoreFailed as e:
            log.warning("%s", e)

    def _failed(self, doing: str, error: Exception) -> StateStoreFailed:
        cause = str(error) or type(error).__name__
        if "No space left" in cause:
            advice = "its filesystem is full: free space there or set SLUICEGATE_STATE_DIR to "
            advice += "a directory on a larger one"
        else:
            advice = "check that disk and that SLUICEGATE_STATE_DIR may be written, or set it "
            advice += "to another directory"
        return StateStoreFailed(
            f"the state store {self.path} failed {doing} ({cause}); {advice}. The changelog "
            "holds everything committed: the partition's next owner restores its store from "
            "it, so nothing is lost or decided twice"
        )


def _text(raw: object) -> str:
    """A raw-mode key as text (rocksdict is untyped: keys arrive as bytes)."""
    assert isinstance(raw, bytes)
    return raw.decode()
