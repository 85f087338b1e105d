"""Input records that leave retention before the processor reads them are a recorded gap.

An instance stopped (or frozen, or behind) for longer than an input topic keeps records
finds its next offset gone. Before, its consumer jumped to the partition's start by itself
(``auto.offset.reset=earliest``): the records in between were never decided and nothing
said so. Now the jump is decided like a record: a dead letter names the partition and the
offsets that went, in the same transaction that moves the group's offset past them.

Retention is played by ``delete_records``, which moves a partition's start exactly as
retention does. An input topic deleted and created again, found with fewer records than the
instance's position, is read from its start, and that is recorded too: judged by its
offsets alone, as for a state written before topic ids were recorded (a topic id tells a
recreated topic at once: ``test_engine_recreated_topics.py``).
"""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition

from sluicegate.cli import main
from streams.engine import positions
from streams.engine.processor import Processor
from streams.kafka.clients import admin_client
from streams.settings import Settings
from tests.integration.test_engine_poison import dead_letters
from tests.support.engine_toy import (
    Running,
    ToyApp,
    ToyProcessor,
    admitted,
    create_toy_topics,
    produce_records,
    record,
)
from tests.support.kafka import expire_records, recreate_topic, unique_settings, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


@pytest.fixture
def settings() -> Iterator[Settings]:
    s = unique_settings(partitions=1)
    create_toy_topics(s, partitions=1)
    yield s


def _records(first: int, last: int) -> list[tuple[str, bytes]]:
    return [record("k", f"r{n}") for n in range(first, last + 1)]


def _run_until(settings: Settings, wanted: set[str]) -> ToyProcessor:
    processor: ToyProcessor = Processor(
        settings, ToyApp(settings), instance_id="gaps", batch_size=100
    )
    running = Running(processor)
    try:
        wait_until(lambda: set(admitted(settings)) >= wanted, timeout_s=60, what=str(wanted))
    finally:
        running.stop()
    assert running.error is None
    return processor


def _forget_topic_ids(settings: Settings) -> None:
    """Make the state one written before topic ids were recorded: a tombstone of
    ``m/topic-ids`` on the changelog, which the next restore applies."""
    producer = Producer(settings.producer_config(**{"enable.idempotence": True}))
    producer.produce(
        settings.topic_named("changelog"), key=positions.TOPIC_IDS_KEY.encode(), partition=0
    )
    assert producer.flush(30) == 0


def _committed(settings: Settings) -> int:
    admin = admin_client(settings)  # alive until its future has the answer
    group = f"{settings.topic_prefix}toy"
    request = [ConsumerGroupTopicPartitions(group, [TopicPartition(settings.topic_named("in"), 0)])]
    (listed,) = admin.list_consumer_group_offsets(request)[group].result(30).topic_partitions
    return int(listed.offset)


def test_records_that_left_retention_unread_get_a_dead_letter_and_the_rest_is_decided(
    settings: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    produce_records(settings, _records(0, 4))
    _run_until(settings, {f"r{n}" for n in range(5)})

    produce_records(settings, _records(5, 10))
    expire_records(settings, "in", 0, before=8)  # r5, r6, r7 go unread
    processor = _run_until(settings, {"r8", "r9", "r10"})

    decided = admitted(settings)
    assert set(decided) == {f"r{n}" for n in (0, 1, 2, 3, 4, 8, 9, 10)}
    assert set(decided.values()) == {1}
    (letter,) = dead_letters(settings)
    value, headers = letter
    assert value == b""
    assert headers["sluicegate.origin"] == f"{settings.topic_named('in')}[0]@5..7".encode()
    assert headers["sluicegate.kind"] == b"unread"
    assert headers["sluicegate.reason"].startswith(
        b"left retention unread: offsets 5 to 7 (3), deleted"
    )
    assert processor.stats.expired == 3
    assert processor.stats.records == 3
    wait_until(lambda: _committed(settings) == 11, timeout_s=30, what="offset 11 committed")

    # What an operator reads: the reason and the offsets, not only a record without a value.
    monkeypatch.setenv("SLUICEGATE_TOPIC_PREFIX", settings.topic_prefix)
    assert main(["replay", "--no-progress", "--topic", "dead-letters"]) == 0
    (line,) = [orjson.loads(text) for text in capsys.readouterr().out.splitlines()]
    assert line["headers"] == {
        "sluicegate.origin": f"{settings.topic_named('in')}[0]@5..7",
        "sluicegate.reason": headers["sluicegate.reason"].decode(),
        "sluicegate.kind": "unread",
    }
    assert line["decode_error"] == "no value"


def test_an_input_topic_created_again_is_read_from_its_start_and_the_move_recorded(
    settings: Settings,
) -> None:
    produce_records(settings, _records(0, 4))
    _run_until(settings, {f"r{n}" for n in range(5)})

    _forget_topic_ids(settings)
    recreate_topic(settings, "in", partitions=1)
    topic = settings.topic_named("in")
    produce_records(settings, _records(5, 6))  # offsets 0 and 1 of the new topic
    processor = _run_until(settings, {"r5", "r6"})

    assert set(admitted(settings).values()) == {1}
    (letter,) = dead_letters(settings)
    assert letter[1]["sluicegate.origin"] == f"{topic}[0]@5".encode()
    assert letter[1]["sluicegate.kind"] == b"moved"
    assert letter[1]["sluicegate.reason"].startswith(b"position 5 lies beyond the partition's end")
    assert processor.stats.expired == 0
    assert processor.stats.records == 2
    wait_until(lambda: _committed(settings) == 2, timeout_s=30, what="offset 2 committed")
