"""The limit: a bare confluent-kafka transactional consume-produce loop over the backlog.

It reads the deliveries as the processor does (read_committed, one consumer group) and, per
input record, writes what admission writes per delivery (:class:`Output`: for each output
topic, the records per delivery and their mean key and value sizes, measured on the real
topics of a Sluicegate run), with the processor's default batch (at most 2,000 records) and
commit interval (100 ms), committing the input offsets in the same transaction. It decides
nothing: the gap between it and admission is what deciding and the engine cost.

Commit order (the same as the engine's): produce a batch's outputs, add the consumer's
positions to the transaction, commit; nothing is consumed while a transaction is open.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from schemas.topics import DELIVERIES
from streams.settings import Settings

BATCH_SIZE = 2000
COMMIT_INTERVAL_S = 0.1


@dataclass(frozen=True)
class Output:
    """One output topic: ``records`` written for ``inputs`` deliveries, mean sizes in bytes."""

    topic: str
    records: int
    inputs: int
    key_bytes: int
    value_bytes: int

    def due(self, n: int) -> int:
        """Records to write for the ``n``-th input (0-based): spread evenly, exact in total."""
        return (n + 1) * self.records // self.inputs - n * self.records // self.inputs


def commit_consumed(producer: Producer, consumer: Consumer) -> None:
    """Add ``consumer``'s positions to ``producer``'s open transaction and commit it."""
    positions = consumer.position(consumer.assignment())
    producer.send_offsets_to_transaction(
        [TopicPartition(p.topic, p.partition, p.offset) for p in positions if p.offset >= 0],
        consumer.consumer_group_metadata(),
    )
    producer.commit_transaction(60)


def run(settings: Settings, outputs: list[Output], expected: int, timeout_s: float = 600) -> float:
    """Consume ``expected`` deliveries, write ``outputs`` for them; seconds from start until
    the last transaction committed."""
    started = time.monotonic()
    group = f"{settings.topic_prefix}limit"
    consumer = Consumer(
        settings.kafka_config(
            **{
                "group.id": group,
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "partition.assignment.strategy": "range",
            }
        )
    )
    producer = Producer(
        settings.producer_config(
            **{
                "transactional.id": f"{group}-{uuid.uuid4().hex[:6]}",
                "enable.idempotence": True,
                "acks": "all",
                # The processor lingers for its commit interval now; this loop ran as fast
                # at 100 ms as at 5 (3 interleaved pairs, 200,000 deliveries), so it keeps 5.
                "linger.ms": 5,
            }
        )
    )
    producer.init_transactions(30)
    consumer.subscribe([settings.topic(DELIVERIES)])
    payloads = [(o.topic, b"v" * o.value_bytes, o) for o in outputs]
    seen = 0
    deadline = started + timeout_s
    try:
        while seen < expected:
            if time.monotonic() > deadline:
                raise TimeoutError(f"limit: {seen} of {expected} consumed in {timeout_s:.0f} s")
            batch: list[Message] = []
            window_ends = time.monotonic() + COMMIT_INTERVAL_S
            while len(batch) < BATCH_SIZE and time.monotonic() < window_ends:
                got = consumer.consume(BATCH_SIZE - len(batch), timeout=0.02)
                for m in got:
                    err = m.error()
                    if err is not None and err.code() != KafkaError._PARTITION_EOF:
                        raise RuntimeError(err.str())
                    if err is None:
                        batch.append(m)
                if seen + len(batch) >= expected:
                    break
            if not batch:
                continue
            producer.begin_transaction()
            for m in batch:
                n = seen
                seen += 1
                key = m.key()
                partition = m.partition() or 0
                for topic, value, output in payloads:
                    for _ in range(output.due(n)):
                        while True:
                            try:
                                producer.produce(topic, key=key, value=value, partition=partition)
                                break
                            except BufferError:
                                producer.poll(0.01)
            commit_consumed(producer, consumer)
        return time.monotonic() - started
    finally:
        consumer.close()
        producer.flush(10)
