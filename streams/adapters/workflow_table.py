"""Every workflow revision, read from the compacted ``workflows`` topic (a global table).

Each processor, ingest and ``publish`` process holds the whole table: it is small (one
record per destination) and every admission decision needs the current revision.

Guarantee: after :meth:`WorkflowTable.catch_up` returns, the table holds every revision
that was written to the topic before the call started. A caller that meets an unknown
subscription should catch up once before treating it as unknown (a workflow applied a
moment ago may not have been read yet).
"""

from __future__ import annotations

import threading
import time

from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition

from schemas.codec import decode
from schemas.events import WorkflowRevised
from schemas.topics import WORKFLOWS
from streams.errors import KafkaUnavailable
from streams.kafka.clients import read_committed_consumer
from streams.kafka.offsets import watermarks
from streams.settings import Settings


class WorkflowTable:
    """Newest ``WorkflowRevised`` per (subscription, environment); thread-safe."""

    def __init__(self, settings: Settings) -> None:
        self._topic = settings.topic(WORKFLOWS)
        self._consumer = read_committed_consumer(
            settings,
            group_id=f"{settings.topic_prefix}workflow-table",
            tuning={
                "enable.partition.eof": True,
                "auto.offset.reset": "earliest",
                # New revisions should reach running processors within ~50 ms.
                "fetch.wait.max.ms": 50,
            },
        )
        self._consumer.assign([TopicPartition(self._topic, 0, 0)])
        self._latest: dict[tuple[str, str], WorkflowRevised] = {}
        self._lock = threading.Lock()

    def get(self, subscription: str, environment: str) -> WorkflowRevised | None:
        with self._lock:
            return self._latest.get((subscription, environment))

    def all(self) -> list[WorkflowRevised]:
        with self._lock:
            return sorted(self._latest.values(), key=lambda w: (w.subscription, w.environment))

    def lookup(self, subscription: str, environment: str) -> WorkflowRevised | None:
        """``get``, catching up with the topic first when the destination is not known yet."""
        found = self.get(subscription, environment)
        if found is None:
            self.catch_up()
            found = self.get(subscription, environment)
        return found

    def refresh(self) -> None:
        """Take in whatever revisions have already arrived, without waiting (call per batch)."""
        with self._lock:
            for msg in self._consumer.consume(1000, timeout=0):
                self._take(msg)

    def catch_up(self, timeout_s: float = 10.0) -> None:
        """Read the topic up to its current end. Raises :class:`KafkaUnavailable` on timeout."""
        with self._lock:
            deadline = time.monotonic() + timeout_s
            high = self._end_offset(deadline)
            while self._position() < high:
                if time.monotonic() > deadline:
                    raise KafkaUnavailable(
                        f"reading {self._topic} did not reach offset {high} in {timeout_s:.0f} s"
                    )
                msg = self._consumer.poll(0.2)
                # An end-of-partition event may be left over from an earlier read: it ends
                # this catch-up only if it is at or past the end offset asked for now.
                end = None if msg is None else self._take(msg)
                if end is not None and end >= high:
                    break

    def _take(self, msg: Message) -> int | None:
        """Apply one record; at an end-of-partition event return its offset, else None."""
        err = msg.error()
        if err is not None:
            if err.code() == KafkaError._PARTITION_EOF:
                return msg.offset() or 0
            raise KafkaUnavailable(f"reading {self._topic}: {err.str()}")
        value = msg.value()
        if value is None:
            return None
        record = decode(value)
        if isinstance(record, WorkflowRevised):
            key = (record.subscription, record.environment)
            current = self._latest.get(key)
            if current is None or record.revision >= current.revision:
                self._latest[key] = record
        return None

    def _end_offset(self, deadline: float) -> int:
        """The topic's end offset, retrying transient errors (a new topic has no leader yet)."""
        try:
            return watermarks(self._consumer, TopicPartition(self._topic, 0), deadline)[1]
        except KafkaException as e:
            raise KafkaUnavailable(f"cannot read {self._topic}: {e.args[0].str()}") from e

    def _position(self) -> int:
        (tp,) = self._consumer.position([TopicPartition(self._topic, 0)])
        return int(tp.offset) if tp.offset >= 0 else 0

    def close(self) -> None:
        self._consumer.close()
