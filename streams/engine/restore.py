"""Restoring a partition's state so that state and committed offsets describe the same batch.

On assignment, before any record of a partition is decided (:class:`Restorer`):

1. **Partition counts.** The input topics and the changelog must share one partition count,
   and each changelog partition records the count it was written with (``m/partitions``): a
   difference means keys moved, so :class:`~streams.errors.PartitionCountChanged` stops the
   instance.
2. **Stable committed offsets.** The group's committed offsets of the input partitions are
   read with ``require_stable`` (the consumer is read_committed): while a transaction that
   sent offsets for them is still open, the coordinator answers ``UNSTABLE_OFFSET_COMMIT``
   and the read is repeated. A transaction that has not sent its offsets by then never can:
   its producer's group generation is older than this instance's (every transaction sends
   offsets with the group metadata), so it can only abort.
3. **The changelog to its true end.** The end is the high watermark (read_uncommitted
   ListOffsets), measured after step 2; the records are consumed read_committed until the
   position passes it, i.e. until every transaction with records there was resolved. A
   read_committed end offset would be the last *stable* offset and stop before an open
   transaction whose offsets step 2 already counted.

   With a valid local checkpoint (``checkpoint.py``: left by a clean revoke or close) the
   store is kept and read from the checkpoint's offset on; otherwise it is wiped and read
   from the start. Either way the changelog is read to the same true end, so the state is
   the same; the checkpoint only saves reading what the store already holds.

The read is a bulk load: large fetches, batches of :data:`RESTORE_BATCH` records written to
RocksDB as one write batch of the raw keys and values (nothing decoded), without the
write-ahead log (``rocks.py``), with the cyclic garbage collector paused, the prefetch
queue refilled as soon as it drains (:data:`READER_TUNING`), and no compaction until the
end, which compacts the whole store once (``PartitionStore.bulk_load``): changelog records
come in offset order, so every level-0 file spans every key, and each automatic compaction
of a few of them merged them with every file of the level below, again and again.
5,000,000 records took 21.1 to 26.5 s with automatic compactions and 14.8 to 17.7 s this
way (alternated runs on one changelog, 2026-12-05, 2 cores), the processor then starting
on a compacted store. Measured on 2 shared cores before that:
1,000,000 admission changelog records (500,000 states of 854 bytes and their timers) as the
processor writes them (uncompressed, in transactions: 480 MB on the broker) in 4.9 to 5.2 s;
30.2 to 30.9 s while each refill of the queue waited librdkafka's default second (hidden
until 2026-12-03 by a benchmark changelog of one repeated state compressed 30-fold).

Steps 2 and 3 wait at most the transaction timeout plus a margin (the broker aborts an
expired transaction on its next check, every 10 s by default); then
:class:`~streams.errors.RestoreTimedOut` says which partition is stuck, and the processor
starts over and tries again. Errors that waiting cannot cure are
:class:`~streams.errors.StateRestoreError` itself. The caller assigns the consumer at exactly
the offsets of step 2, unless the restored state records that its decisions reach further
(``positions.py``: the group's offsets expired or were reset while the state was kept).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicCollection,
    TopicPartition,
)

from schemas.topics import Role
from streams import collector
from streams.clock import wall_clock_ms
from streams.engine import checkpoint
from streams.engine.checkpoint import CheckpointError
from streams.engine.heap import release_freed_memory
from streams.engine.store import PARTITIONS_KEY, PartitionStore
from streams.errors import (
    ChangelogDeletesRecords,
    PartitionCountChanged,
    RestoreTimedOut,
    StateRestoreError,
)
from streams.kafka.clients import admin_client, read_committed_consumer, uncommitted_consumer
from streams.kafka.offsets import RETRY_PAUSE_S, transient, watermarks
from streams.kafka.topics import deleting_state, read_configs
from streams.settings import Settings

log = logging.getLogger("sluicegate.processor")

CHECK_TIMEOUT_S = 10.0
"""How long an assignment waits for its changelog's configuration (``check_changelog``)."""

RESTORE_MARGIN_S = 30.0
"""Waited beyond the transaction timeout for open transactions to be resolved."""

TRIM_AFTER = 100_000
"""A restore of at least this many records ends by flushing its memtables to SST files and
returning its freed memory to the system, so that what a processor holds after its
assignment is the same however large its state and wherever RocksDB's last automatic flush
fell (up to the whole write-buffer budget, 64 MiB, was left in memtables before)."""
RESTORE_BATCH = 10_000
"""Changelog records consumed, and written to RocksDB as one write batch, at a time."""
CONSUME_WAIT_S = 0.02
"""How long one read waits for :data:`RESTORE_BATCH` records before it takes what has come:
a partition of fewer records waits this long for its last read (it was 0.2 s)."""
READER_TUNING: dict[str, object] = {
    "enable.partition.eof": True,
    "auto.offset.reset": "earliest",
    # A restore reads one partition from its start: fetches of 4 MiB and a prefetch queue of
    # 16 MiB keep it as fast as 16/64 MiB did (measured) at less than half the peak memory
    # (1,000,000 records of an LZ4-compressed changelog, whose fetches decompress to many
    # times their size: 386 MiB peak instead of 881 MiB).
    "max.partition.fetch.bytes": 4 * 1024 * 1024,
    "queued.max.messages.kbytes": 16 * 1024,
    "queued.min.messages": 20_000,
    # Once the queue has been full, librdkafka postpones the partition's next fetch by this
    # much (1 s by default) however soon the queue drains: 16 MiB are drained in about a
    # tenth of that, so a restore idled most of its time. An uncompressed changelog (what
    # the processor writes) of 1,000,000 records: 30.2 and 30.9 s with the default, 4.9 and
    # 5.2 s with 10 ms; the largest RSS while restoring 124 to 127 MiB and 145 to 148 MiB
    # (the queue now stays full). 1, 10 and 50 ms measured alike.
    "fetch.queue.backoff.ms": 10,
    # A partition's read ends with the end-of-partition event, which comes with the first
    # fetch that finds nothing more (a changelog ends with a commit marker, never returned
    # as a record); the broker holds such a fetch for this long. At the default 500 ms (or
    # whatever an operator passed through) each partition's restore took about a second
    # however small: 6 partitions of 3,000 records in 5.6 to 6.6 s, 0.24 to 1.25 s with
    # 10 ms; 1,000,000 records in 3.6 s, 2.5 s with 10 ms (4 alternated runs each, both with
    # CONSUME_WAIT_S at 0.02 s).
    "fetch.wait.max.ms": 10,
}


MIGRATE = (
    "partition counts of keyed topics are fixed for the life of a deployment; to change "
    "them, start a new deployment under a new SLUICEGATE_TOPIC_PREFIX with "
    "SLUICEGATE_PARTITIONS set, and replay the deliveries into it"
)


class Inputs(NamedTuple):
    """Input topics as the broker describes them: partition counts and topic ids."""

    counts: dict[str, int]
    ids: dict[str, str]


class Restorer:
    """The restore-side clients of one processor instance (never members of its group)."""

    def __init__(self, settings: Settings, group: str, bound_s: float) -> None:
        """``group`` names the (never joined) consumer groups of the restore clients."""
        self.bound_s = bound_s
        self._reader = read_committed_consumer(
            settings,
            group_id=group,
            tuning=READER_TUNING,
        )
        self._ends = uncommitted_consumer(settings, group_id=f"{group}-ends")
        self._admin = admin_client(settings)
        self._bootstrap = settings.kafka
        self._located: set[str] = set()
        """The topics whose partition leaders :attr:`_reader` has learned."""

    def close(self) -> None:
        self._reader.close()
        self._ends.close()

    # -- 1. partition counts ---------------------------------------------------------------

    def partition_counts(self, topics: Iterable[str], wait_s: float = 30.0) -> dict[str, int]:
        """Each topic's partition count; a topic whose leaders are not known yet is waited
        for up to ``wait_s``."""
        deadline = time.monotonic() + wait_s
        counts: dict[str, int] = {}
        for topic in topics:
            while True:
                try:
                    metadata = self._ends.list_topics(topic, timeout=30).topics[topic]
                    error = metadata.error
                except KafkaException as e:
                    error = e.args[0]
                if error is None:
                    break
                if not transient(error):
                    raise StateRestoreError(f"cannot read metadata of {topic}: {error.str()}")
                if time.monotonic() > deadline:
                    raise RestoreTimedOut(f"cannot read metadata of {topic}: {error.str()}")
                time.sleep(RETRY_PAUSE_S)
            counts[topic] = len(metadata.partitions)
        return counts

    def common_count(self, topics: Sequence[str]) -> int:
        """The one partition count of ``topics``; :class:`PartitionCountChanged` otherwise."""
        counts = self.partition_counts(topics)
        if len(set(counts.values())) != 1:
            shown = ", ".join(f"{t} has {n} partitions" for t, n in counts.items())
            raise PartitionCountChanged(f"co-partitioned topics disagree ({shown}); {MIGRATE}")
        return next(iter(counts.values()))

    def describe_inputs(self, topics: Sequence[str], wait_s: float = 30.0) -> Inputs:
        """``topics``' partition counts and ids (Kafka gives a topic a new id whenever it is
        created again), in one round trip. A topic not known yet (being created) is waited
        for up to ``wait_s``."""
        deadline = time.monotonic() + wait_s
        while True:
            timeout = max(1.0, min(deadline - time.monotonic(), 30.0))
            asked = self._admin.describe_topics(
                TopicCollection(list(topics)), request_timeout=timeout
            )
            try:
                described = {name: f.result(timeout) for name, f in asked.items()}
            except KafkaException as e:
                error, what = e.args[0], f"cannot describe {', '.join(topics)}"
                if not transient(error):
                    raise StateRestoreError(f"{what}: {error.str()}") from e
                if time.monotonic() > deadline:
                    raise RestoreTimedOut(f"{what}: {error.str()}") from e
                time.sleep(RETRY_PAUSE_S)
                continue
            return Inputs(
                {name: len(t.partitions) for name, t in described.items()},
                {name: str(t.topic_id) for name, t in described.items()},
            )

    def check_changelog(self, topic: str) -> None:
        """:class:`~streams.errors.ChangelogDeletesRecords` if the broker may delete
        ``topic``'s records (``streams.kafka.topics.deleting_state``; a configuration that
        cannot be read is logged and passed over)."""
        refused = deleting_state(
            self._admin, {topic: Role.CHANGELOG}, self._bootstrap, CHECK_TIMEOUT_S
        )
        if refused is not None:
            raise ChangelogDeletesRecords(refused)

    def _config(self, topic: str, timeout: float) -> dict[str, str]:
        """``topic``'s configuration: the entries the broker gives a value."""
        return read_configs(self._admin, [topic], timeout)[topic]

    # -- 2. stable committed offsets -------------------------------------------------------

    def committed(
        self, consumer: Consumer, partitions: Sequence[TopicPartition], deadline: float
    ) -> dict[tuple[str, int], int | None]:
        """Committed offsets once no open transaction holds offsets for ``partitions``."""
        wanted = [TopicPartition(tp.topic, tp.partition) for tp in partitions]
        last = "no answer"
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RestoreTimedOut(
                    f"committed offsets of {_names(wanted)} could not be read stable for "
                    f"{self.bound_s:.0f} s ({last}): the broker is out of reach, or a "
                    "transaction of the previous owner is still open past the transaction "
                    "timeout; check the broker"
                )
            try:
                answer = consumer.committed(wanted, timeout=max(1.0, min(remaining, 10.0)))
            except KafkaException as e:
                err = e.args[0]
                if not transient(err):
                    raise StateRestoreError(f"cannot read committed offsets: {err.str()}") from e
                last = err.str()
                continue
            errors = [tp.error for tp in answer if tp.error is not None]
            if not errors:
                return {
                    (tp.topic, tp.partition): tp.offset if tp.offset >= 0 else None for tp in answer
                }
            err = errors[0]
            if err.code() != KafkaError.UNSTABLE_OFFSET_COMMIT and not err.retriable():
                raise StateRestoreError(f"cannot read committed offsets: {err.str()}")
            last = err.str()
            time.sleep(0.2)

    def low_watermark(self, topic: str, partition: int, deadline: float) -> int:
        return self._watermarks(topic, partition, deadline)[0]

    def _watermarks(self, topic: str, partition: int, deadline: float) -> tuple[int, int]:
        try:
            return watermarks(self._ends, TopicPartition(topic, partition), deadline)
        except KafkaException as e:
            err = e.args[0]
            failed = RestoreTimedOut if transient(err) else StateRestoreError
            raise failed(f"{topic}[{partition}]: {err.str()}") from e

    # -- 3. the changelog to its true end --------------------------------------------------

    def restore(
        self, topic: str, partition: int, path: Path, *, count: int, deadline: float, owner: str
    ) -> tuple[PartitionStore, int]:
        """The store for ``partition`` at the changelog's true end, and the records read.

        With a valid local checkpoint (``checkpoint.py``) the store at ``path`` is kept and
        only the changelog after the checkpoint is read; otherwise the store is wiped and
        filled from the changelog's start. Raises :class:`PartitionCountChanged` if the
        changelog partition was written with another partition count than ``count``.
        """
        # Each partition may wait its own bound: the restores before it took their time.
        deadline = max(deadline, time.monotonic() + self.bound_s)
        store, start = self._open(
            topic, partition, path, count=count, deadline=deadline, owner=owner
        )
        try:
            restored = self._fill(store, topic, partition, deadline, start)
            recorded = store.get(PARTITIONS_KEY)
            if recorded is not None and int(recorded) != count:
                raise PartitionCountChanged(
                    f"{topic}[{partition}] was written with {int(recorded)} partitions, but the "
                    f"topics now have {count} partitions: keys have moved; {MIGRATE}"
                )
        except BaseException:
            store.abandon()
            raise
        return store, restored

    def _open(
        self, topic: str, partition: int, path: Path, *, count: int, deadline: float, owner: str
    ) -> tuple[PartitionStore, int | None]:
        """The store to fill and the offset to fill it from (``None``: wiped, from the start)."""
        try:
            kept = checkpoint.take(checkpoint.path_of(path))
        except (CheckpointError, OSError) as e:
            log.warning("%s[%d]: checkpoint unreadable (%s); restoring all", topic, partition, e)
            return PartitionStore(path, fresh=True), None
        if kept is None:
            log.info("%s[%d]: no local checkpoint; restoring in full", topic, partition)
            return PartitionStore(path, fresh=True), None
        try:
            changelog = self.describe(topic, partition, deadline)
        except StateRestoreError as e:
            log.warning("%s[%d]: %s; restoring in full", topic, partition, e)
            return PartitionStore(path, fresh=True), None
        why = checkpoint.judge(
            kept, changelog, partitions=count, owner=owner, now_ms=wall_clock_ms()
        )
        if why is None and path.is_dir():
            try:
                store = PartitionStore(path, fresh=False)
            except Exception as e:  # a damaged store is wiped, whatever RocksDB says of it
                log.warning("%s[%d]: cannot open the kept store (%s)", topic, partition, e)
                return PartitionStore(path, fresh=True), None
            if store.sequence() == kept.sequence:
                log.info(
                    "%s[%d]: kept the local store; reading the changelog from offset %d to %d",
                    topic,
                    partition,
                    kept.offset,
                    changelog.high,
                )
                return store, kept.offset
            why = f"the store is at sequence {store.sequence()}, the checkpoint {kept.sequence}"
            store.abandon()
        log.warning("%s[%d]: checkpoint not used (%s); restoring in full", topic, partition, why)
        return PartitionStore(path, fresh=True), None

    def leave_checkpoint(
        self,
        store: PartitionStore,
        topic: str,
        partition: int,
        *,
        count: int,
        owner: str,
        deadline: float,
    ) -> None:
        """Flush and close ``store`` and write its checkpoint (``checkpoint.py``).

        Call only while this instance still owns ``partition`` with no transaction open and
        every committed write applied to ``store`` (a clean revoke): the changelog's high
        watermark is then the position the store reflects.
        """
        try:
            sequence = store.flush()
        except BaseException:
            store.abandon()  # the flush's error is the one to report
            raise
        store.close()
        changelog = self.describe(topic, partition, deadline)
        checkpoint.write(
            checkpoint.path_of(store.path),
            checkpoint.Checkpoint(
                changelog=topic,
                partition=partition,
                topic_id=changelog.topic_id,
                partitions=count,
                offset=changelog.high,
                sequence=sequence,
                owner=owner,
                written_ms=wall_clock_ms(),
            ),
        )

    def describe(self, topic: str, partition: int, deadline: float) -> checkpoint.Changelog:
        """The changelog partition's topic id, watermarks and ``delete.retention.ms``."""
        low, high = self._watermarks(topic, partition, deadline)
        timeout = max(1.0, min(deadline - time.monotonic(), 30.0))
        try:
            (described,) = self._admin.describe_topics(
                TopicCollection([topic]), request_timeout=timeout
            ).values()
            retention = int(self._config(topic, timeout)["delete.retention.ms"])
            topic_id = str(described.result(timeout).topic_id)
        except (KafkaException, KeyError, ValueError, TypeError) as e:
            raise StateRestoreError(f"cannot describe {topic}: {e}") from e
        return checkpoint.Changelog(topic, partition, topic_id, low, high, retention)

    def _fill(
        self, store: PartitionStore, topic: str, partition: int, deadline: float, start: int | None
    ) -> int:
        """Read ``topic[partition]`` from ``start`` (its low watermark if ``None``) to its
        true end into ``store``; the records read.

        The bulk path: each consumed batch becomes one RocksDB write batch of the raw keys and
        values (a tombstone deletes), nothing decoded and no object kept per record.
        """
        low, high = self._watermarks(topic, partition, deadline)
        position = low if start is None else start
        if high <= position:
            return 0
        self._locate(topic, deadline)
        self._reader.assign([TopicPartition(topic, partition, position)])
        try:
            # Each consumed message is a GC-tracked object (streams/collector.py).
            with collector.paused(), store.bulk_load():
                restored = self._read(
                    store, topic, partition, position=position, high=high, deadline=deadline
                )
                if restored >= TRIM_AFTER:
                    store.flush()  # see TRIM_AFTER; compacted with the rest on leaving
        finally:
            self._reader.unassign()
        if restored >= TRIM_AFTER:
            release_freed_memory()
        return restored

    def _locate(self, topic: str, deadline: float) -> None:
        """Have the reader learn ``topic``'s partition leaders before its first assignment.

        A reader assigned a topic it has no metadata for fetched nothing until its next
        metadata refresh: with both cores busy, a fresh reader's first partition waited 1.01
        to 1.04 s in 5 of 8 runs (a processor's first assignment of 3 small partitions 1.06
        to 1.09 s in 6 of 6). Failing here costs only that wait: the assignment still works.
        """
        if topic in self._located:
            return
        try:
            self._reader.list_topics(
                topic, timeout=max(1.0, min(deadline - time.monotonic(), 10.0))
            )
        except KafkaException as e:
            log.debug("%s: metadata not read before the restore (%s)", topic, e.args[0].str())
            return
        self._located.add(topic)

    def _read(
        self,
        store: PartitionStore,
        topic: str,
        partition: int,
        *,
        position: int,
        high: int,
        deadline: float,
    ) -> int:
        """The loop of :meth:`_fill` on the assigned reader: the records written to ``store``."""
        restored = 0
        # Bounded is the wait for a transaction that holds the read back, not the size of the
        # state: the limit moves on whenever the position does.
        limit = max(deadline, time.monotonic() + self.bound_s)
        while position < high:
            now = time.monotonic()
            if now > limit:
                raise RestoreTimedOut(
                    f"{topic}[{partition}] did not get past offset {position} to its end "
                    f"{high} for {self.bound_s:.0f} s: the broker is out of reach, or a "
                    "transaction there is still open past the transaction timeout; check "
                    "the broker"
                )
            before = position
            messages = self._reader.consume(RESTORE_BATCH, timeout=CONSUME_WAIT_S)
            if not messages:
                continue
            batch = store.batch()
            put, delete = batch.put, batch.delete
            last = None
            for msg in messages:
                if msg.error() is not None:
                    position = max(position, self._end_of_partition(msg, topic, partition))
                    continue
                value = msg.value()
                if value is None:
                    delete(msg.key() or b"")
                else:
                    put(msg.key() or b"", value)
                last = msg
            if last is not None:
                position = max(position, (last.offset() or 0) + 1)
                restored += len(batch)
                store.write(batch)
            if position > before:
                limit = max(limit, now + self.bound_s)
        return restored

    @staticmethod
    def _end_of_partition(msg: Message, topic: str, partition: int) -> int:
        """The position an end-of-partition event carries (0 for an error that goes away by
        itself, such as a broker out of reach: the read's bound decides how long to wait);
        any other error stops the restore."""
        err = msg.error()
        assert err is not None
        if err.code() == KafkaError._PARTITION_EOF:
            return msg.offset() or 0
        if transient(err):
            log.debug("%s[%d]: %s; reading on", topic, partition, err.str())
            return 0
        raise StateRestoreError(f"{topic}[{partition}]: {err.str()}")


def _names(partitions: Sequence[TopicPartition]) -> str:
    return ", ".join(f"{tp.topic}[{tp.partition}]" for tp in partitions[:4]) + (
        "" if len(partitions) <= 4 else f" and {len(partitions) - 4} more"
    )
