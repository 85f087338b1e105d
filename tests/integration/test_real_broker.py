"""The broker and the database are real: transactions, fencing, offsets, and a Postgres round-trip.

These pin down the guarantees the processor is built on, on the very broker `make up`
starts: if a broker setting broke transactions on one node, these fail first.
"""

from __future__ import annotations

import uuid

import psycopg
import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from streams.kafka.topics import ensure_topics
from streams.settings import Settings, load_settings
from tests.support.kafka import create_topics, read_topic, unique_settings

pytestmark = pytest.mark.integration


@pytest.fixture()
def one_topic() -> tuple[Settings, str]:
    settings = unique_settings()
    topic = settings.topic_named("plain")
    create_topics(settings, [(topic, 1, False)])
    return settings, topic


def transactional(settings: Settings, txn_id: str) -> Producer:
    producer = Producer(settings.producer_config(**{"transactional.id": txn_id}))
    producer.init_transactions(30)
    return producer


def test_aborted_transaction_is_invisible_and_committed_one_visible(
    one_topic: tuple[Settings, str],
) -> None:
    settings, topic = one_topic
    producer = transactional(settings, f"tx-{uuid.uuid4().hex}")
    producer.begin_transaction()
    producer.produce(topic, key=b"k", value=b"aborted")
    producer.flush(10)
    producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, key=b"k", value=b"committed")
    producer.commit_transaction(30)

    committed = [m.value() for m in read_topic(settings, topic)]
    everything = [m.value() for m in read_topic(settings, topic, committed_only=False)]
    assert committed == [b"committed"]
    assert everything == [b"aborted", b"committed"]


def test_offsets_sent_in_a_transaction_are_committed(one_topic: tuple[Settings, str]) -> None:
    settings, topic = one_topic
    seed = Producer(settings.producer_config())
    for i in range(5):
        seed.produce(topic, value=str(i).encode())
    assert seed.flush(10) == 0

    group = f"g-{uuid.uuid4().hex}"
    consumer = Consumer(
        settings.kafka_config(
            **{
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
            }
        )
    )
    consumer.subscribe([topic])
    seen: list[bytes] = []
    while len(seen) < 5:
        seen.extend(m.value() or b"" for m in consumer.consume(10, timeout=1) if not m.error())
    producer = transactional(settings, f"tx-{uuid.uuid4().hex}")
    producer.begin_transaction()
    producer.send_offsets_to_transaction(
        [TopicPartition(topic, 0, 5)], consumer.consumer_group_metadata(), 30
    )
    producer.commit_transaction(30)
    (committed,) = consumer.committed([TopicPartition(topic, 0)], timeout=10)
    consumer.close()
    assert committed.offset == 5


def test_a_second_producer_with_the_same_transactional_id_fences_the_first(
    one_topic: tuple[Settings, str],
) -> None:
    settings, topic = one_topic
    txn_id = f"tx-{uuid.uuid4().hex}"
    first = transactional(settings, txn_id)
    first.begin_transaction()
    first.produce(topic, value=b"from the zombie")
    first.flush(10)
    second = transactional(settings, txn_id)  # aborts the first's open transaction
    second.begin_transaction()
    second.produce(topic, value=b"from the new owner")
    second.commit_transaction(30)
    with pytest.raises(KafkaException) as raised:
        first.commit_transaction(30)
    assert raised.value.args[0].fatal() or raised.value.args[0].txn_requires_abort()
    assert [m.value() for m in read_topic(settings, topic)] == [b"from the new owner"]


def test_declared_topics_are_idempotent_and_copartitioned() -> None:
    settings = unique_settings(partitions=4)
    first = ensure_topics(settings)
    assert ensure_topics(settings) == first
    assert (
        first[settings.topic_named("deliveries")]
        == first[settings.topic_named("branch-results")]
        == 4
    )
    assert first[settings.topic_named("workflows")] == 1


def test_postgres_round_trip() -> None:
    settings = load_settings()
    with psycopg.connect(settings.pg_dsn, autocommit=False) as conn:
        conn.execute("CREATE TEMP TABLE probe (id int PRIMARY KEY, note text)")
        conn.execute("INSERT INTO probe VALUES (%s, %s)", (1, "it's real; -- not injected"))
        row = conn.execute("SELECT note FROM probe WHERE id = %s", (1,)).fetchone()
    assert row == ("it's real; -- not injected",)
