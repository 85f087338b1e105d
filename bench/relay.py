"""Section 2's exactly-once floor: a bare transactional relay, produce to read_committed visible.

What an exactly-once consume-transform-produce loop costs one record's latency on this
broker when it decides nothing. A separate process (``python -m bench.relay``, started by
:class:`RelayProcess`) reads an input topic read_committed, and for every record writes
about what admission writes per delivery (section 1's table: 1 record on ``runs``, 2.25 on
``tasks``, 1.73 on the changelog): one record on a runs-like topic (the input's value: the
record a tail consumer times), two on a tasks-like and two on a changelog-like topic, all in
the input's partition, committing the consumed offsets in the same transaction. It does so
the processor's way: the same client factories and tuning (linger for the commit interval,
the transactional retry backoff), :func:`streams.kafka.consuming.take` (what has arrived,
at most 2,000, waiting at most the 100 ms commit interval for the first), then commit.

Commit order (the engine's): produce a batch's records, add the consumer's positions to the
transaction, commit; nothing is consumed while a transaction is open.

Between this floor and the bare round trip is what exactly-once itself costs on this broker;
between it and the webhook, what Sluicegate adds (the front door, deciding, state).
"""

from __future__ import annotations

import argparse
import uuid

from confluent_kafka import KafkaError

from bench.backlog import Stage, start_child, stop_children, stop_on_sigterm
from bench.limit import BATCH_SIZE, COMMIT_INTERVAL_S, commit_consumed
from streams.kafka.clients import read_committed_consumer, transactional_producer
from streams.kafka.consuming import take
from streams.settings import Settings, load_settings

INPUT = "relay-in"
OUTPUTS = (("relay-runs", 1, 464), ("relay-tasks", 2, 362), ("relay-changelog", 2, 370))
"""(topic, records per input, value bytes) after the input; the first carries the input's
value and is the one timed."""
TRANSACTION_TIMEOUT_MS = 10_000
"""The processor's default."""


def relay(settings: Settings) -> int:
    """Relay until interrupted (SIGTERM, with :func:`stop_on_sigterm`); the records relayed."""
    source = settings.topic_named(INPUT)
    targets = [(settings.topic_named(t), n, b"v" * size) for t, n, size in OUTPUTS[1:]]
    timed = settings.topic_named(OUTPUTS[0][0])
    interval_ms = int(COMMIT_INTERVAL_S * 1000)
    producer = transactional_producer(
        settings,
        transactional_id=f"{settings.topic_prefix}relay-{uuid.uuid4().hex[:6]}",
        client_id="bench-relay",
        tuning={"transaction.timeout.ms": TRANSACTION_TIMEOUT_MS, "linger.ms": interval_ms},
    )
    consumer = read_committed_consumer(
        settings,
        group_id=f"{settings.topic_prefix}relay",
        client_id="bench-relay",
        tuning={"auto.offset.reset": "earliest", "partition.assignment.strategy": "range"},
    )
    relayed = 0
    try:
        producer.init_transactions(30)
        consumer.subscribe([source])
        while True:
            batch = []
            for m in take(consumer, BATCH_SIZE, COMMIT_INTERVAL_S):
                err = m.error()
                if err is None:
                    batch.append(m)
                elif err.code() != KafkaError._PARTITION_EOF:
                    raise RuntimeError(err.str())
            if not batch:
                continue
            producer.begin_transaction()
            for m in batch:
                key, partition = m.key(), m.partition() or 0
                producer.produce(timed, key=key, value=m.value(), partition=partition)
                for topic, count, value in targets:
                    for _ in range(count):
                        producer.produce(topic, key=key, value=value, partition=partition)
            commit_consumed(producer, consumer)
            relayed += len(batch)
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close()
    return relayed


def topics() -> list[str]:
    """The short names of the relay's topics (input first, then the timed output)."""
    return [INPUT, *(t for t, _n, _size in OUTPUTS)]


class RelayProcess:
    """The relay as its own process on ``stage`` (its topics must exist)."""

    def __init__(self, stage: Stage) -> None:
        self.child = start_child(stage, "relay", [], module="bench.relay")

    def close(self) -> None:
        stop_children([self.child])


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(prog="python -m bench.relay", description=__doc__).parse_args(argv)
    stop_on_sigterm()
    print(f"relayed {relay(load_settings()):,} records", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
