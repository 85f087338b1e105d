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

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from schemas.codec import decode
from schemas.events import WorkflowRevised
from sluicegate.config import Settings
from streams.errors import KafkaUnavailable


class WorkflowTable:
    """Newest ``WorkflowRevised`` per (subscription, environment); thread-safe."""

    def __init__(self, settings: Settings) -> None:
        self._topic = settings.topic("workflows")
        self._consumer = Consumer(
            settings.kafka_config(
                **{
                    "group.id": f"{settings.topic_prefix}workflow-table",
                    "enable.auto.commit": False,
                    "enable.partition.eof": True,
                    "auto.offset.reset": "earliest",
                    "isolation.level": "read_committed",
                }
            )
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

    def catch_up(self, timeout_s: float = 10.0) -> None:
        """Read the topic up to its current end. Raises :class:`KafkaUnavailable` on timeout."""
        with self._lock:
            try:
                _, high = self._consumer.get_watermark_offsets(
                    TopicPartition(self._topic, 0), timeout=timeout_s, cached=False
                )
            except KafkaException as e:
                raise KafkaUnavailable(f"cannot read {self._topic}: {e.args[0].str()}") from e
            deadline = time.monotonic() + timeout_s
            while self._position() < high:
                if time.monotonic() > deadline:
                    raise KafkaUnavailable(
                        f"reading {self._topic} did not reach offset {high} in {timeout_s:.0f} s"
                    )
                msg = self._consumer.poll(0.2)
                if msg is None:
                    continue
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        break
                    raise KafkaUnavailable(f"reading {self._topic}: {err.str()}")
                value = msg.value()
                if value is None:
                    continue
                record = decode(value)
                if isinstance(record, WorkflowRevised):
                    key = (record.subscription, record.environment)
                    current = self._latest.get(key)
                    if current is None or record.revision >= current.revision:
                        self._latest[key] = record

    def _position(self) -> int:
        (tp,) = self._consumer.position([TopicPartition(self._topic, 0)])
        return int(tp.offset) if tp.offset >= 0 else 0

    def close(self) -> None:
        self._consumer.close()
