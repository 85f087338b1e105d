"""The projected topics on the broker: which partitions exist, their offsets, the consumer.

The projector never commits Kafka group offsets: :meth:`Sources.assign` assigns every
partition explicitly at the offset stored in PostgreSQL (its earliest when none is). Offsets
are asked of a separate admin client, because the assigned consumer's connection is busy with
long-polling fetches.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping

from confluent_kafka import (
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Message,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

from projections.errors import ProjectionError, TopicRecreated
from projections.share import Share
from projections.store import Offsets
from schemas.topics import projected
from streams.kafka.clients import admin_client, read_committed_consumer
from streams.kafka.offsets import RETRY_PAUSE_S, transient
from streams.settings import Settings

log = logging.getLogger("sluicegate.projector")

LEADERS_WAIT_S = 30.0
"""How long a partition without a known leader is asked again before the projector gives up."""
_EARLIEST = OffsetSpec.earliest()  # type: ignore[no-untyped-call]
_LATEST = OffsetSpec.latest()  # type: ignore[no-untyped-call]


def source_topics() -> tuple[str, ...]:
    """Short names of the topics projected: every catalogue topic but state changelogs
    (``schemas.topics.projected``; dead letters into ``dead_letters``, never decoded); topics
    added later are picked up."""
    return tuple(spec.name for spec in projected())


def _consumer(settings: Settings, schema: str) -> Consumer:
    return read_committed_consumer(
        settings,
        # Required by librdkafka even though this consumer never joins the group or
        # commits: partitions are assigned from the offsets stored in PostgreSQL.
        group_id=f"{settings.topic_prefix}projector.{schema}",
        tuning={
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            # Never jump by itself: a next offset that left retention is a gap the projector
            # records (projector.py), and one beyond the end a recreated topic.
            "auto.offset.reset": "error",
            # Short broker-side waits on empty fetches: a partition's end (and so "caught
            # up") is noticed within ~100 ms, at the cost of a few idle requests a second.
            "fetch.wait.max.ms": 100,
        },
    )


class Sources:
    """The projected topics of ``settings`` as read into ``schema``; not thread-safe."""

    def __init__(
        self,
        settings: Settings,
        schema: str,
        topics: tuple[str, ...],
        share: Share | None = None,
    ) -> None:
        self.settings = settings
        self.schema = schema
        self.share = share
        """Only these partitions are discovered and assigned (all when None)."""
        self.partitions: set[tuple[str, int]] = set()
        """The partitions assigned last."""
        self.last_discovery = 0.0
        self._full = {settings.topic_named(t): t for t in topics}
        self._consumer: Consumer | None = None
        self._admin_client: AdminClient | None = None
        self._warned: set[str] = set()
        self._warned_at: dict[str, float] = {}

    def close(self) -> None:
        """Close the consumer (nothing is committed to Kafka)."""
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def _admin(self) -> AdminClient:
        if self._admin_client is None:
            self._admin_client = admin_client(self.settings)
        return self._admin_client

    def consumer(self) -> Consumer:
        """The assigned consumer (created, and its metadata read, on first use)."""
        if self._consumer is None:
            consumer = _consumer(self.settings, self.schema)
            # Learn the partition leaders now: an assignment made before the consumer has
            # metadata for its topics waits for the next refresh, about a second.
            try:
                consumer.list_topics(timeout=10.0)
            except KafkaException as e:
                consumer.close()
                raise ProjectionError(
                    f"cannot reach Kafka at {self.settings.kafka}: {e.args[0].str()}"
                ) from e
            self._consumer = consumer
        return self._consumer

    def discover(self, *, every_share: bool = False) -> set[tuple[str, int]]:
        """The partitions of the projected topics (in the share, unless ``every_share``)
        that exist now."""
        try:
            topics = self._admin().list_topics(timeout=10.0).topics
        except KafkaException as e:
            raise ProjectionError(
                f"cannot reach Kafka at {self.settings.kafka}: {e.args[0].str()}"
            ) from e
        found: set[tuple[str, int]] = set()
        for full, short in self._full.items():
            meta = topics.get(full)
            if meta is None or meta.error is not None or not meta.partitions:
                if full not in self._warned:
                    self._warned.add(full)
                    log.warning("topic %s does not exist (yet); it will be picked up", full)
                continue
            found.update(
                (short, p)
                for p in meta.partitions
                if every_share or self.share is None or (short, p) in self.share
            )
        if not every_share:  # a look at every share assigns nothing
            self.last_discovery = time.monotonic()
        return found

    def list_offsets(self, partitions: set[tuple[str, int]], spec: OffsetSpec) -> Offsets:
        """The offsets ``spec`` names (read_committed) of ``partitions``.

        A partition whose leader is not known yet (a topic created a moment ago, a leader
        moving) is asked again until :data:`LEADERS_WAIT_S` has passed; any other error, or
        that one past the wait, is a :class:`ProjectionError`."""
        # Asked of a separate admin client: the assigned consumer's connection is busy with
        # long-polling fetches, behind which such requests would wait up to half a second.
        found: Offsets = {}
        pending = set(partitions)
        deadline = time.monotonic() + LEADERS_WAIT_S
        while pending:
            request = {
                TopicPartition(self.settings.topic_named(short), partition): spec
                for short, partition in pending
            }
            waiting: KafkaException | None = None
            try:
                futures = self._admin().list_offsets(
                    request, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=15
                )
                for tp, future in futures.items():
                    try:
                        found[(self._full[tp.topic], tp.partition)] = int(future.result().offset)
                    except KafkaException as e:
                        if not transient(e.args[0]):
                            raise
                        waiting = e
            except KafkaException as e:
                raise ProjectionError(
                    f"cannot read offsets from Kafka at {self.settings.kafka}: {e.args[0].str()}"
                ) from e
            pending -= found.keys()
            if not pending:
                return found
            if waiting is None or time.monotonic() + RETRY_PAUSE_S > deadline:
                why = "no answer" if waiting is None else waiting.args[0].str()
                raise ProjectionError(
                    f"cannot read offsets from Kafka at {self.settings.kafka}: {why} for "
                    f"{len(pending)} partitions (after {LEADERS_WAIT_S:.0f} s at most)"
                ) from waiting
            time.sleep(RETRY_PAUSE_S)
        return found

    def end_offsets(self, *, every_share: bool = False) -> Offsets:
        """The current read_committed end (last stable offset) of every source partition
        (of the share, unless ``every_share``)."""
        return self.list_offsets(self.discover(every_share=every_share), _LATEST)

    def bounds(self, tp: tuple[str, int]) -> tuple[int, int]:
        """The first offset ``tp`` still holds and its end (read_committed)."""
        return self.list_offsets({tp}, _EARLIEST)[tp], self.list_offsets({tp}, _LATEST)[tp]

    def start_offsets(self) -> Offsets:
        """The first offset every source partition still holds (retention moves it on)."""
        return self.list_offsets(self.discover(), _EARLIEST)

    def assign(
        self,
        positions: Offsets,
        *,
        only_if_changed: bool,
        claim: Callable[[Mapping[str, str]], None],
    ) -> None:
        """Assign every existing partition at its stored offset in ``positions`` (its earliest
        when none is stored), unless ``only_if_changed`` and the partitions are the same.

        ``claim`` is given the topics' ids first, every time (short name -> id), and raises
        :class:`TopicRecreated` for a topic recreated since the offsets were stored
        (``topic_ids.py``): topics deleted and created again between two looks have the
        same partitions, and the assigned consumer reads them on from its old positions
        without a word. A stored offset beyond its partition's end raises it too; one behind
        its start is assigned as it is, for the projector to record the gap (projector.py)."""
        partitions = self.discover()
        claim(self.topic_ids({short for short, _ in partitions}))
        if only_if_changed and partitions == self.partitions:
            return
        consumer = self.consumer()
        # Explicit offsets everywhere: a logical "beginning" costs the consumer an extra
        # lookup of about half a second per assignment.
        lows = self.list_offsets(partitions, _EARLIEST)
        highs = self.list_offsets({tp for tp in partitions if tp in positions}, _LATEST)
        assignment = []
        for short, partition in sorted(partitions):
            full = self.settings.topic_named(short)
            stored = positions.get((short, partition))
            if stored is not None:
                high = highs[(short, partition)]
                if stored > high:
                    raise TopicRecreated(
                        f"{full}[{partition}]: stored offset {stored} is beyond the end "
                        f"({high}); the topic was recreated. Run `sluicegate projections "
                        "rebuild --drop-history` to project it afresh (it drops what was "
                        "projected from the old topic)."
                    )
            offset = lows[(short, partition)] if stored is None else stored
            assignment.append(TopicPartition(full, partition, offset))
        # A re-seek to the stored offsets: dropping the old assignment first discards
        # everything fetched under it, so no message from before the seek can arrive after.
        consumer.unassign()
        consumer.assign(assignment)
        self.partitions = partitions
        log.info("projecting %d partitions into schema %s", len(assignment), self.schema)

    def topic_ids(self, topics: set[str]) -> dict[str, str]:
        """The id Kafka gave each of ``topics`` (short names) when it was created."""
        full = {self.settings.topic_named(short): short for short in topics}
        if not full:
            return {}
        try:
            described = self._admin().describe_topics(
                TopicCollection(sorted(full)), request_timeout=10.0
            )
            return {full[name]: str(f.result().topic_id) for name, f in described.items()}
        except KafkaException as e:
            raise ProjectionError(
                f"cannot describe the topics at {self.settings.kafka}: {e.args[0].str()}"
            ) from e

    def warning(self, text: str) -> None:
        """Log a Kafka problem, once per 30 s per message."""
        # librdkafka reports a lost broker on every poll; say it once per 30 s per message.
        now = time.monotonic()
        if now - self._warned_at.get(text, -1e9) >= 30.0:
            self._warned_at[text] = now
            log.warning("Kafka: %s", text)

    def where(self, m: Message) -> tuple[tuple[str, int] | None, int]:
        """``((short topic, partition), offset)`` of a consumed message, ``(None, 0)`` when it
        is none of ours (an error event without a partition)."""
        short = self._full.get(m.topic() or "")
        partition = m.partition()
        if short is None or partition is None:
            err = m.error()
            if err is not None and err.code() != KafkaError._PARTITION_EOF:
                self.warning(err.str())
            return None, 0
        return (short, partition), int(m.offset() or 0)
