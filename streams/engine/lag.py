"""How far an engine instance is behind the end of each input partition it holds.

Sampled by the instance's own loop (:func:`sample`, at most once per :data:`SAMPLE_EVERY_S`)
without asking the broker: from each held partition's committed offset (the next offset
after its last committed transaction, as the instance keeps it) to the partition's end as
the consumer's last fetch saw it (librdkafka's cached high watermark, which fetches update
whether or not they bring records). The consumer's own position is no use here: librdkafka
knows it only once a record of the partition was consumed, so a partition idle since its
assignment would have none. So the figure costs one call into librdkafka per partition a
second and can be one fetch old; it counts offsets, not records (a transaction's commit
marker takes one, so a caught-up instance shows 0 or 1 per partition), and a batch taken but
not committed yet still counts. Published in the instance's status (``status.py``) for
``GET /metrics`` (``sluicegate/instance_metrics.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from confluent_kafka import Consumer, TopicPartition

SAMPLE_EVERY_S = 1.0


@dataclass(frozen=True)
class PartitionLag:
    """One input partition: its ``committed`` offset and the partition's ``end``."""

    topic: str
    partition: int
    committed: int
    end: int

    @property
    def offsets(self) -> int:
        """Offsets between the committed offset and the end (never negative)."""
        return max(0, self.end - self.committed)


def sample(
    consumer: Consumer, committed: Mapping[tuple[str, int], int]
) -> tuple[PartitionLag, ...]:
    """The lag of every partition of ``committed`` (``(topic, partition)``: next offset)
    whose end the consumer has seen (one not fetched since its assignment is left out),
    sorted."""
    found = []
    for (topic, partition), offset in sorted(committed.items()):
        watermarks = consumer.get_watermark_offsets(TopicPartition(topic, partition), cached=True)
        if offset < 0 or watermarks is None or watermarks[1] < 0:
            continue
        found.append(PartitionLag(topic, partition, offset, watermarks[1]))
    return tuple(found)
