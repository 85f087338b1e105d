"""The partitions an instance holds: their stores, committed offsets and partition count.

:meth:`Assignment.assign` runs in the rebalance callback (``restore.py`` has the order and
why it makes state and offsets describe the same batch) and ends by assigning the consumer
at exactly the committed offsets it read. From then on the offsets are tracked here: every
commit advances them, and an aborted transaction seeks back to them (:meth:`rewind`), so no
committed-offset read is needed after an abort.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, TopicPartition

from streams.engine import positions
from streams.engine.batch import Expired, Item, ProcessorStats, expired_in, restored
from streams.engine.restore import MIGRATE, Inputs, Restorer
from streams.engine.store import PARTITIONS_KEY, PartitionStore
from streams.errors import (
    InputTopicRecreated,
    PartitionCountChanged,
    RestoreTimedOut,
    TransactionUnresolved,
)

log = logging.getLogger("sluicegate.processor")

_SEEK_ATTEMPTS = 5
CHECKPOINT_ON_TIMEOUT_S = 5.0
"""How long checkpoints of restored partitions may take when another's restore timed out."""


class Assignment:
    def __init__(
        self,
        restorer: Restorer,
        input_topics: Sequence[str],
        changelog_topic: str,
        state_dir: Path,
        who: str,
    ) -> None:
        self.restorer = restorer
        self.input_topics = list(input_topics)
        self.changelog_topic = changelog_topic
        self.state_dir = state_dir
        self.who = who
        self.stores: dict[int, PartitionStore] = {}
        self.offsets: dict[tuple[str, int], int] = {}  # committed, of every assigned partition
        self.partitions = 0  # the co-partitioned topics' count when assigned
        self.unrecorded: set[int] = set()  # changelog partitions without m/partitions yet
        self.topic_ids: dict[str, str] = {}  # the input topics' ids when assigned
        self.ids_unrecorded: set[int] = set()  # stores whose m/topic-ids are not those
        # Input topics found created again since a store's positions were read: their moves,
        # to be decided with the next batch (taken), and put back if its transaction aborts.
        self.moved: list[Expired] = []
        self._moving: list[Expired] = []
        # Whether a revoke may leave checkpoints: False once the instance stops on an error
        # (a transaction's outcome may be unknown, so the stores may not match the changelog).
        self.checkpoints = True
        # The input check is a metadata round trip: it runs beside the batch's
        # decisions instead of before them (see input_check).
        self._checker = ThreadPoolExecutor(1, thread_name_prefix="input-check")

    def assign(
        self, consumer: Consumer, partitions: Sequence[TopicPartition], stats: ProcessorStats
    ) -> None:
        """Check counts and the changelog's cleanup policy, read stable offsets, restore every
        store, assign at those offsets."""
        started = time.monotonic()
        deadline = started + self.restorer.bound_s
        self.partitions = self.restorer.common_count([*self.input_topics, self.changelog_topic])
        self.restorer.check_changelog(self.changelog_topic)
        self.topic_ids = self.restorer.describe_inputs(self.input_topics).ids
        committed = self.restorer.committed(consumer, partitions, deadline)
        count = 0
        done: list[int] = []
        for partition in sorted({tp.partition for tp in partitions} - set(self.stores)):
            try:
                store, records = self.restorer.restore(
                    self.changelog_topic,
                    partition,
                    self.state_dir / f"p{partition}",
                    count=self.partitions,
                    deadline=deadline,
                    owner=self.who,
                )
            except RestoreTimedOut:
                self._keep_restored(done)
                # What the partitions before it read was restored all the same.
                restored(stats, count, time.monotonic() - started, sorted(self.stores))
                raise
            self.stores[partition] = store
            done.append(partition)
            count += records
            if store.get(PARTITIONS_KEY) is None:
                self.unrecorded.add(partition)
        deadline = max(deadline, time.monotonic() + self.restorer.bound_s)
        resumed, elsewhere = self._resume(committed)
        starts = [
            TopicPartition(t, p, self.restorer.low_watermark(t, p, deadline) if o is None else o)
            for (t, p), o in resumed.items()
        ]
        self.offsets.update({(tp.topic, tp.partition): tp.offset for tp in starts})
        self._record_moves(elsewhere, committed)
        consumer.assign(starts)
        elapsed = time.monotonic() - started
        restored(stats, count, elapsed, sorted(self.stores))
        log.info("assigned %s: restored %d records in %.2f s", stats.assigned, count, elapsed)

    def _resume(
        self, committed: dict[tuple[str, int], int | None]
    ) -> tuple[dict[tuple[str, int], int | None], dict[tuple[str, int], tuple[int, str]]]:
        """Where each partition resumes (``positions.py``): the committed offset, unless the
        restored state records that its decisions reach further; and the positions recorded
        in a topic since created again, with the id it had.

        A partition whose position was read in a topic since created again resumes at the
        new topic's start, whatever offset the group has there: the state has decided none
        of its records (the first transaction that decides any of them records the new id),
        so such an offset was committed from the old position (every transaction commits the
        offsets of every held partition) or set by hand, and going by it could skip records."""
        recorded = {
            p: positions.decode(s.get(positions.OFFSETS_KEY)) for p, s in self.stores.items()
        }
        ids = {
            p: positions.decode_ids(s.get(positions.TOPIC_IDS_KEY)) for p, s in self.stores.items()
        }
        self.ids_unrecorded |= {p for p, i in ids.items() if i != self.topic_ids}
        resumed: dict[tuple[str, int], int | None] = {}
        elsewhere: dict[tuple[str, int], tuple[int, str]] = {}
        behind: list[str] = []
        for (topic, partition), offset in sorted(committed.items()):
            position = recorded.get(partition, {}).get(topic)
            was = ids.get(partition, {}).get(topic)
            if position is not None and not positions.read_in(was, self.topic_ids.get(topic)):
                elsewhere[(topic, partition)] = (position, str(was))
                resumed[(topic, partition)] = None
                continue
            resumed[(topic, partition)] = positions.resume_at(offset, position)
            if position is not None and position > (offset or 0):
                shown = "none" if offset is None else offset
                behind.append(f"{topic}[{partition}] at {position} (committed: {shown})")
        if behind:
            log.warning(
                "the group's committed offsets are missing or behind what the restored state "
                "decided (expired after the group was empty for offsets.retention.minutes, or "
                "deleted or reset by hand): resuming where the state's decisions end, so that "
                "nothing is decided twice: %s",
                ", ".join(behind),
            )
        return resumed, elsewhere

    def _record_moves(
        self,
        elsewhere: dict[tuple[str, int], tuple[int, str]],
        committed: dict[tuple[str, int], int | None],
    ) -> None:
        """A move to decide, as a dead letter, for each partition whose recorded position was
        read in a topic deleted since: the partition goes on from the new topic's start, and
        nothing of the new topic is skipped."""
        for (topic, partition), (position, was) in sorted(elsewhere.items()):
            start = self.offsets[(topic, partition)]
            offset = committed.get((topic, partition))
            passed = "" if offset is None else f", not from the group's offset {offset} there"
            reason = (
                f"the topic was deleted and created again after this state's decisions (topic "
                f"id {was} then, {self.topic_ids[topic]} now): position {position} was in the "
                f"topic before; the new one is read from its start, offset {start}{passed}"
            )
            gap = Expired(topic, partition, position, start, reason)
            log.error("%s: %s", gap.origin(), reason)
            self.moved = [g for g in self.moved if (g.topic, g.partition) != (topic, partition)]
            self.moved.append(gap)

    def take_moved(self) -> list[Expired]:
        """The moves not yet decided (:meth:`_record_moves`), to lead the next batch (each
        sets its partition's offset, so it precedes the records read from there): put back
        by :meth:`discard` when the batch's transaction aborts, gone once one commits."""
        self._moving.extend(self.moved)
        self.moved = []
        return list(self._moving)

    def record_positions(self, offsets: dict[tuple[str, int], int]) -> None:
        """Buffer ``m/offsets`` into the store of every partition ``offsets`` advance."""
        for partition in {p for (t, p), o in offsets.items() if self.offsets.get((t, p)) != o}:
            store = self.stores.get(partition)
            if store is not None:
                mine = {
                    t: offsets[(t, partition)]
                    for t in self.input_topics
                    if (t, partition) in offsets
                }
                store.put(positions.OFFSETS_KEY, positions.encode(mine))

    def _keep_restored(self, partitions: list[int]) -> None:
        """Close the stores this assignment restored before another partition's restore
        timed out, each with a checkpoint: the instance starts over, and its next attempt
        reads only what their changelogs gained since instead of restoring them again.

        Safe as on a clean revoke: nothing has been decided since they were restored, and no
        transaction of this instance is open. Once a checkpoint cannot be written (the
        broker is likely out of reach), the rest are closed without one.
        """
        deadline = time.monotonic() + CHECKPOINT_ON_TIMEOUT_S
        for partition in partitions:
            store = self.stores.pop(partition)
            self.unrecorded.discard(partition)
            self.ids_unrecorded.discard(partition)
            if time.monotonic() > deadline:
                store.abandon()
            elif not self._checkpoint(store, partition, deadline):
                deadline = 0.0

    def _checkpoint(self, store: PartitionStore, partition: int, deadline: float) -> bool:
        """Close ``store`` leaving its checkpoint; False (closed without one, logged) when
        that failed. A checkpoint only saves time: its failure never fails the caller."""
        try:
            self.restorer.leave_checkpoint(
                store,
                self.changelog_topic,
                partition,
                count=self.partitions,
                owner=self.who,
                deadline=deadline,
            )
        except Exception as e:
            log.warning("no checkpoint for partition %d: %s", partition, e)
            return False
        return True

    def revoke(
        self, partitions: Sequence[TopicPartition], stats: ProcessorStats, *, lost: bool = False
    ) -> None:
        """Close the stores of ``partitions``; on a clean revoke (not ``lost``, no error
        stopped the instance) each leaves a checkpoint, so taking it back restores only what
        it lacks (``checkpoint.py``). A store whose checkpoint fails is simply closed: the
        next assignment restores it in full."""
        for tp in partitions:
            self.offsets.pop((tp.topic, tp.partition), None)
        keep = self.checkpoints and not lost
        deadline = time.monotonic() + 30.0
        gone = {(tp.topic, tp.partition) for tp in partitions}
        self.moved = [g for g in self.moved if (g.topic, g.partition) not in gone]
        self._moving = [g for g in self._moving if (g.topic, g.partition) not in gone]
        for partition in sorted({tp.partition for tp in partitions}):
            store = self.stores.pop(partition, None)
            self.unrecorded.discard(partition)
            self.ids_unrecorded.discard(partition)
            if store is None:
                continue
            if not keep or store.pending():
                store.abandon()
                continue
            self._checkpoint(store, partition, deadline)
        stats.assigned = sorted(self.stores)
        log.info("revoked; now holding %s", stats.assigned)

    def close(self) -> None:
        # Before the restorer closes: a check in flight still uses its client.
        self._checker.shutdown(wait=True)
        for store in self.stores.values():
            store.abandon()
        self.stores.clear()

    def input_check(self) -> Future[Inputs]:
        """Start reading the input topics' partition counts and ids; :meth:`verify_inputs`
        judges them.

        The processor starts this when a batch is taken and verifies it before the batch's
        transaction commits, so the metadata round trips overlap the decisions instead of
        preceding them; a changed count or id aborts the transaction, so nothing decided
        with the old count, or read in a topic since deleted, leaves.
        """
        return self._checker.submit(self.restorer.describe_inputs, self.input_topics)

    def verify_inputs(self, check: Future[Inputs]) -> None:
        """Raise :class:`PartitionCountChanged` if an input topic's count changed since the
        assignment, :class:`InputTopicRecreated` if one was created again (waits for
        ``check``; a metadata failure is raised as it is)."""
        now = check.result()
        changed = {t: n for t, n in now.counts.items() if n != self.partitions}
        if changed:
            shown = ", ".join(f"{t} now has {n}" for t, n in changed.items())
            raise PartitionCountChanged(
                f"the state of {self.who} was restored for {self.partitions} partitions, but "
                f"{shown}: keys have moved, so this instance stops before committing anything; "
                f"{MIGRATE}"
            )
        recreated = sorted(t for t, i in now.ids.items() if self.topic_ids.get(t, i) != i)
        if recreated:
            raise InputTopicRecreated(
                f"{', '.join(recreated)} deleted and created again while {self.who} held its "
                "partitions (its topic id changed): the batch is not committed; the "
                "partitions are taken again, and the new topic read from its start"
            )

    def record_meta(self) -> None:
        """Buffer ``m/partitions`` into every store that has not recorded it yet, and
        ``m/topic-ids`` into every store that records other ids (or none)."""
        for partition in self.unrecorded:
            self.stores[partition].put(PARTITIONS_KEY, str(self.partitions).encode())
        if self.ids_unrecorded:
            ids = positions.encode_ids(self.topic_ids)
            for partition in self.ids_unrecorded:
                self.stores[partition].put(positions.TOPIC_IDS_KEY, ids)

    def offsets_after(self, items: Sequence[Item]) -> dict[tuple[str, int], int]:
        """Every assigned partition's offset once ``items`` are committed."""
        offsets = dict(self.offsets)
        for item in items:
            record = item.input
            if record is not None:
                offsets[(record.topic, record.partition)] = record.offset + 1
            elif (gap := expired_in(item)) is not None:
                offsets[(gap.topic, gap.partition)] = gap.next
        return offsets

    def committed(self, offsets: dict[tuple[str, int], int]) -> None:
        for store in self.stores.values():
            store.apply()
        self.offsets = offsets
        self.unrecorded.clear()
        self.ids_unrecorded.clear()
        self._moving = []

    def discard(self) -> None:
        for store in self.stores.values():
            store.discard()
        self.moved, self._moving = [*self._moving, *self.moved], []

    def rewind(self, consumer: Consumer) -> None:
        """Seek every assigned partition back to its committed offset, or stop the instance."""
        for (topic, partition), offset in self.offsets.items():
            for attempt in range(_SEEK_ATTEMPTS):
                try:
                    consumer.seek(TopicPartition(topic, partition, offset))
                    break
                except KafkaException as e:
                    err = e.args[0]
                    if not err.retriable() or attempt == _SEEK_ATTEMPTS - 1:
                        raise TransactionUnresolved(
                            f"cannot seek {topic}[{partition}] back to {offset} after an abort "
                            f"({err.str()})"
                        ) from e
                    time.sleep(0.05 * 2**attempt)
