"""A delivery under another key, or on a partition its key does not belong to, is decided
where it belongs.

Sluicegate's producers partition by Java's murmur2 of the admission key, so every copy of an
occurrence lands on one partition, whose instance holds the occurrence's state. A producer
that bypasses the front doors (an explicit partition, librdkafka's default CRC32
partitioner, a key that is not the admission key) could put a copy on another partition, or
under another key, where no state knows the occurrence: it used to get a second run. The
processor now forwards such a record, in the same transaction as its consumed offset, under
the admission key its payload names to the partition that key belongs to, where it is
decided like any other copy.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import Producer

from schemas.codec import encode
from schemas.commands import AdmitDelivery
from schemas.events import DeliveryDeduplicated, RunAdmitted
from streams.adapters.deliveries import new_delivery_id
from streams.core.partitioning import partition_of
from streams.kafka.topics import ensure_topics
from tests.support.admission import AdmissionHarness, candle, delivery_for
from tests.support.kafka import read_topic, unique_settings

pytestmark = pytest.mark.integration

PARTITIONS = 3


@pytest.fixture()
def harness() -> Iterator[AdmissionHarness]:
    h = AdmissionHarness(partitions=PARTITIONS)
    h.apply_workflow()
    yield h
    h.close()


def copy_of(harness: AdmissionHarness, body: dict[str, object]) -> AdmitDelivery:
    workflow = harness.table.lookup("btc-breakout", "paper")
    assert workflow is not None
    return delivery_for(
        workflow,
        body,
        delivery_id=new_delivery_id(),
        received_at_ms=harness.clock(),
        channel="publish",
    )


def test_copies_on_other_partitions_or_under_other_keys_get_one_run(
    harness: AdmissionHarness,
) -> None:
    a = candle()
    b = candle(candle_open="2026-11-30T12:01:00Z")
    first = harness.deliver(a)
    owner_a = partition_of(first.admission_key.encode(), PARTITIONS)
    copy_a = copy_of(harness, a)
    rekeyed_a = copy_of(harness, a)
    only_b = copy_of(harness, b)
    owner_b = partition_of(only_b.admission_key.encode(), PARTITIONS)
    stray = Producer(harness.settings.producer_config())
    topic = harness.settings.topic_named("deliveries")
    for record, owner in ((copy_a, owner_a), (only_b, owner_b)):
        stray.produce(
            topic,
            key=record.admission_key.encode(),
            value=encode(record),
            partition=(owner + 1) % PARTITIONS,
        )
    # Keyed by its delivery id, on the partition that key belongs to: only its key is wrong.
    wrong_key = rekeyed_a.delivery_id.encode()
    stray.produce(
        topic,
        key=wrong_key,
        value=encode(rekeyed_a),
        partition=partition_of(wrong_key, PARTITIONS),
    )
    assert stray.flush(10) == 0
    harness.start_processor()
    outcomes = harness.wait_for_outcomes(4)

    admitted = outcomes.of(RunAdmitted)
    assert sorted(r.admission_key for r in admitted) == sorted(
        [first.admission_key, only_b.admission_key]
    )
    duplicates = outcomes.of(DeliveryDeduplicated)
    assert sorted(d.delivery_id for d in duplicates) == sorted(
        [copy_a.delivery_id, rekeyed_a.delivery_id]
    )
    for delivery in (first, copy_a, rekeyed_a, only_b):
        assert len(outcomes.outcome_for(delivery.delivery_id)) == 1

    # The strays were forwarded to their owners, saying where they came from.
    on_topic = read_topic(harness.settings, topic)
    forwarded = [m for m in on_topic if dict(m.headers() or {}).get("sluicegate.forwarded-from")]
    assert sorted((m.key(), m.partition()) for m in forwarded) == sorted(
        [
            (copy_a.admission_key.encode(), owner_a),
            (rekeyed_a.admission_key.encode(), owner_a),
            (only_b.admission_key.encode(), owner_b),
        ]
    )
    processor = harness.processors[0][0]
    assert processor.stats.forwarded == 3


def test_sluicegates_producers_put_every_key_where_the_check_expects_it() -> None:
    settings = unique_settings(partitions=7)
    ensure_topics(settings)
    topic = settings.topic_named("deliveries")
    keys = [f"sub/paper/src/d:{n}|{'x' * (n % 40)}".encode() for n in range(300)]
    producer = Producer(settings.producer_config())
    for key in keys:
        producer.produce(topic, key=key, value=b"v")
    assert producer.flush(10) == 0
    placed = {m.key(): m.partition() for m in read_topic(settings, topic)}
    assert placed == {key: partition_of(key, 7) for key in keys}
