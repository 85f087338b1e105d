"""State of one input partition: RocksDB (rocksdict) plus a write buffer for the open batch.

Keys are ``s/<state key>`` for an aggregate's encoded state, ``t/<due ms, 13 digits>/<state
key>`` for its next timer and ``m/<name>`` for the engine's own metadata (``m/partitions``: the
partition count the changelog partition was written with). Writes go to the buffer while a
Kafka transaction is open; they reach RocksDB only after that transaction committed
(:meth:`apply`), and an aborted transaction simply :meth:`discard`\\ s them. So RocksDB holds
committed state only, and the buffer is what the changelog records of the open transaction
carry.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path

from rocksdict import Options, Rdict, WriteBatch

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


def parse_timer_key(store_key: str) -> tuple[int, str]:
    due, _, key = store_key[len(TIMER_PREFIX) :].partition("/")
    return int(due), key


class PartitionStore:
    """One partition's committed state in RocksDB and the open batch's writes in memory."""

    def __init__(self, path: Path, *, fresh: bool) -> None:
        """Open the store at ``path``; ``fresh`` wipes whatever an earlier owner left there."""
        if fresh and path.exists():
            shutil.rmtree(path)
        path.mkdir(parents=True, exist_ok=True)
        options = Options(raw_mode=True)
        options.create_if_missing(True)
        self.path = path
        self._db = Rdict(str(path), options=options)
        self._buffer: dict[str, bytes | None] = {}

    def get(self, store_key: str) -> bytes | None:
        if store_key in self._buffer:
            return self._buffer[store_key]
        value = self._db.get(store_key.encode())
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
        """Write (key, value-or-None) pairs straight to RocksDB (changelog restore)."""
        batch = WriteBatch(raw_mode=True)
        for key, value in items:
            if value is None:
                batch.delete(key.encode())
            else:
                batch.put(key.encode(), value)
        self._db.write(batch)

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
        self._db.close()


def _text(raw: object) -> str:
    """A raw-mode key as text (rocksdict is untyped: keys arrive as bytes)."""
    assert isinstance(raw, bytes)
    return raw.decode()
