"""A partition store's local checkpoint: the changelog position the store reflects.

Kafka Streams under exactly-once keeps a local store across a clean restart this way, and so
does the processor: on a clean revoke (after the last transaction committed or aborted, never
for partitions *lost* to the group, never when the instance stops on an error) the store's
memtables are flushed, the store is closed, and ``p<N>.checkpoint`` is written beside it with:

* ``offset``: the changelog partition's high watermark read while this instance still owned
  it with no transaction open, i.e. every changelog record below it is reflected in the store
  (this instance's own committed writes, and what it restored) or aborted;
* ``sequence``: RocksDB's sequence number after the flush, which the reopened store must show
  again (a checkpoint whose store lost writes is recognised);
* the changelog's name, partition and topic id, the partition count, the owner (app/instance)
  and when it was written.

On assignment the checkpoint is read and **deleted at once**, before the store is used, so a
crash (kill -9) from then on leaves none and the next start wipes and restores in full. It is
trusted (:func:`judge`) only if everything matches: same changelog topic id (a deleted and
recreated changelog has another), partition, partition count and owner, ``offset`` within
``[low watermark, high watermark]``, and younger than the changelog's ``delete.retention.ms``
(less :data:`AGE_MARGIN_MS`): until then no tombstone written after the checkpoint can have
been compacted away, so reading from ``offset`` to the true end sees every delete. Then the
store is kept and only the changelog from ``offset`` on is read; records another owner wrote
in between are among them. Anything else (missing, unreadable, foreign or hostile bytes, a
mismatch) wipes the store and restores it in full: a checkpoint can only save time, never
change the state restored.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

FORMAT = 2
"""Format 2 since 2026-12-04: the store beside it writes its files with partitioned index and
filters (``rocks.py``). A store of format 1 has whole-file indexes, which lookups read in full
until compaction happens to rewrite each file (4.5 ms a lookup of 5,000,000 records), so its
checkpoint is refused and the store restored in full, once, on upgrade (about 3 s per
1,000,000 records)."""
MAX_BYTES = 4096
"""A checkpoint file larger than this is not read (it is not one of ours)."""
AGE_MARGIN_MS = 3_600_000
"""Subtracted from ``delete.retention.ms``: clocks of broker and instance may differ."""


class CheckpointError(Exception):
    """A checkpoint file that cannot be read as one (the store is then restored in full)."""


@dataclass(frozen=True)
class Checkpoint:
    changelog: str
    partition: int
    topic_id: str
    partitions: int
    offset: int
    sequence: int
    owner: str
    written_ms: int


@dataclass(frozen=True)
class Changelog:
    """What the broker says of a changelog partition at assignment."""

    topic: str
    partition: int
    topic_id: str
    low: int
    high: int
    delete_retention_ms: int


def path_of(store: Path) -> Path:
    """The checkpoint file of the store directory ``store`` (beside it, not inside)."""
    return store.with_name(f"{store.name}.checkpoint")


def write(path: Path, checkpoint: Checkpoint) -> None:
    """Write ``checkpoint`` durably: a temporary file, fsync, rename, fsync of the directory."""
    body = json.dumps({"format": FORMAT, **asdict(checkpoint)}, sort_keys=True).encode()
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "wb") as out:
        out.write(body)
        out.flush()
        os.fsync(out.fileno())
    os.replace(temporary, path)
    _sync_directory(path.parent)


def take(path: Path) -> Checkpoint | None:
    """Read and delete the checkpoint at ``path``; ``None`` if there is none.

    The file is gone (durably) when this returns, also when it was unreadable
    (:class:`CheckpointError`): from now on the store is in use, and a crash must find none.
    """
    try:
        with open(path, "rb") as source:
            raw = source.read(MAX_BYTES + 1)
    except FileNotFoundError:
        return None
    finally:
        remove(path)
    return parse(raw)


def remove(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        return
    _sync_directory(path.parent)


def parse(raw: bytes) -> Checkpoint:
    """The checkpoint in ``raw``; :class:`CheckpointError` for anything that is not exactly one."""
    if len(raw) > MAX_BYTES:
        raise CheckpointError(f"{len(raw)} bytes, more than a checkpoint has")
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise CheckpointError(f"not JSON: {e}") from e
    if not isinstance(body, dict):
        raise CheckpointError("not a JSON object")
    if body.get("format") == 1:
        raise CheckpointError(
            "format 1: its store's files have whole-file indexes (before 2026-12-04); "
            "restored in full so that they are written partitioned"
        )
    if body.get("format") != FORMAT:
        raise CheckpointError(f"not a checkpoint of format {FORMAT}")
    fields = {
        "changelog": str,
        "partition": int,
        "topic_id": str,
        "partitions": int,
        "offset": int,
        "sequence": int,
        "owner": str,
        "written_ms": int,
    }
    if set(body) != {"format", *fields}:
        raise CheckpointError(f"unexpected fields {sorted(set(body) ^ {'format', *fields})}")
    for name, kind in fields.items():
        value = body[name]
        if type(value) is not kind or (isinstance(value, int) and value < 0):
            raise CheckpointError(f"{name} is not a {kind.__name__} of the right range")
    return Checkpoint(**{name: body[name] for name in fields})


def judge(
    checkpoint: Checkpoint, changelog: Changelog, *, partitions: int, owner: str, now_ms: int
) -> str | None:
    """Why ``checkpoint`` cannot be trusted for ``changelog`` now; ``None`` if it can."""
    if (checkpoint.changelog, checkpoint.partition) != (changelog.topic, changelog.partition):
        return f"written for {checkpoint.changelog}[{checkpoint.partition}]"
    if checkpoint.topic_id != changelog.topic_id:
        return "the changelog was deleted and created again since"
    if checkpoint.owner != owner:
        return f"written by {checkpoint.owner}"
    if checkpoint.partitions != partitions:
        return f"written with {checkpoint.partitions} partitions, now {partitions}"
    if not changelog.low <= checkpoint.offset <= changelog.high:
        return (
            f"offset {checkpoint.offset} outside the changelog's "
            f"[{changelog.low}, {changelog.high}]"
        )
    age = now_ms - checkpoint.written_ms
    if age < 0 or age >= changelog.delete_retention_ms - AGE_MARGIN_MS:
        return f"{age} ms old: tombstones after it may have been compacted away"
    return None


def _sync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
