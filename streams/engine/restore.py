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

Steps 2 and 3 wait at most the transaction timeout plus a margin (the broker aborts an
expired transaction on its next check, every 10 s by default); then
:class:`~streams.errors.StateRestoreError` says which partition is stuck. The caller assigns
the consumer at exactly the offsets of step 2.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from streams.engine.store import PARTITIONS_KEY, PartitionStore
from streams.errors import PartitionCountChanged, StateRestoreError
from streams.kafka.clients import read_committed_consumer, uncommitted_consumer
from streams.kafka.offsets import RETRY_PAUSE_S, transient, watermarks
from streams.settings import Settings

log = logging.getLogger("sluicegate.processor")

RESTORE_MARGIN_S = 30.0
"""Waited beyond the transaction timeout for open transactions to be resolved."""

MIGRATE = (
    "partition counts of keyed topics are fixed for the life of a deployment; to change "
    "them, start a new deployment under a new SLUICEGATE_TOPIC_PREFIX with "
    "SLUICEGATE_PARTITIONS set, and replay the deliveries into it"
)


class Restorer:
    """The restore-side clients of one processor instance (never members of its group)."""

    def __init__(self, settings: Settings, group: str, bound_s: float) -> None:
        """``group`` names the (never joined) consumer groups of the restore clients."""
        self.bound_s = bound_s
        self._reader = read_committed_consumer(
            settings,
            group_id=group,
            tuning={"enable.partition.eof": True, "auto.offset.reset": "earliest"},
        )
        self._ends = uncommitted_consumer(settings, group_id=f"{group}-ends")

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
                if not transient(error) or time.monotonic() > deadline:
                    raise StateRestoreError(f"cannot read metadata of {topic}: {error.str()}")
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
                raise StateRestoreError(
                    f"committed offsets of {_names(wanted)} stayed unstable for "
                    f"{self.bound_s:.0f} s ({last}): a transaction of the previous owner is "
                    "still open past the transaction timeout; check the broker"
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
            raise StateRestoreError(f"{topic}[{partition}]: {e.args[0].str()}") from e

    # -- 3. the changelog to its true end --------------------------------------------------

    def restore(
        self, topic: str, partition: int, path: Path, count: int, deadline: float
    ) -> tuple[PartitionStore, int]:
        """A wiped store for ``partition`` filled from its changelog, and the records read.

        Raises :class:`PartitionCountChanged` if the changelog partition was written with
        another partition count than ``count``.
        """
        store = PartitionStore(path, fresh=True)
        try:
            restored = self._fill(store, topic, partition, deadline)
            recorded = store.get(PARTITIONS_KEY)
            if recorded is not None and int(recorded) != count:
                raise PartitionCountChanged(
                    f"{topic}[{partition}] was written with {int(recorded)} partitions, but the "
                    f"topics now have {count} partitions: keys have moved; {MIGRATE}"
                )
        except BaseException:
            store.close()
            raise
        return store, restored

    def _fill(self, store: PartitionStore, topic: str, partition: int, deadline: float) -> int:
        low, high = self._watermarks(topic, partition, deadline)
        if high <= low:
            return 0
        restored = 0
        self._reader.assign([TopicPartition(topic, partition, low)])
        try:
            position = low
            while position < high:
                if time.monotonic() > deadline:
                    raise StateRestoreError(
                        f"{topic}[{partition}] did not get past offset {position} to its end "
                        f"{high} within {self.bound_s:.0f} s: a transaction there is still "
                        "open past the transaction timeout; check the broker"
                    )
                batch: list[tuple[str, bytes | None]] = []
                for msg in self._reader.consume(5000, timeout=0.2):
                    position = max(position, self._position_after(msg, topic, partition, batch))
                if batch:
                    store.restore_batch(iter(batch))
                    restored += len(batch)
        finally:
            self._reader.unassign()
        return restored

    @staticmethod
    def _position_after(
        msg: Message, topic: str, partition: int, batch: list[tuple[str, bytes | None]]
    ) -> int:
        """The offset after ``msg`` (an end-of-partition event carries the position)."""
        err = msg.error()
        offset = msg.offset() or 0
        if err is not None:
            if err.code() == KafkaError._PARTITION_EOF:
                return offset
            raise StateRestoreError(f"{topic}[{partition}]: {err.str()}")
        key = msg.key()
        batch.append(("" if key is None else bytes(key).decode("utf-8", "replace"), msg.value()))
        return offset + 1


def _names(partitions: Sequence[TopicPartition]) -> str:
    return ", ".join(f"{tp.topic}[{tp.partition}]" for tp in partitions[:4]) + (
        "" if len(partitions) <= 4 else f" and {len(partitions) - 4} more"
    )
