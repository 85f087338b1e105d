"""A static member whose consumer the broker fenced starts over; a second live instance with
the same id still stops the first.

With static membership the consumer's ``group.instance.id`` is the instance id. The broker
fences a member when another consumer joins with that id; librdkafka then reports a fatal
consumer error (code ``_FATAL``) and the consumer can never be used again. That happens
without any second instance too: after a broker restart or a session timeout, librdkafka
can rejoin in a way the broker reads as a newer member with the same id. An instance that
logged the error and went on polling its dead consumer sat alive, idle and healthy-looking
for good.

Here a bare consumer joins the group with the instance's id, which the broker fences exactly
like the spurious case, and leaves again: the instance must take its partitions back and go
on. Two live processors with one id (on two hosts: two state directories) must not both go
on; the one started second keeps running.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer

from streams.engine.processor import Processor
from streams.engine.status import Phase
from streams.errors import ProcessorFenced
from streams.settings import Settings
from tests.support.engine_toy import (
    Running,
    ToyApp,
    ToyProcessor,
    admitted,
    create_toy_topics,
    produce_records,
    record,
)
from tests.support.kafka import unique_settings, wait_until

pytestmark = pytest.mark.integration


@pytest.fixture()
def toy() -> Iterator[tuple[Settings, ToyApp]]:
    settings = unique_settings(partitions=2)
    create_toy_topics(settings, 2)
    yield settings, ToyApp(settings)


def intruder(settings: Settings, app: ToyApp, instance_id: str) -> Consumer:
    """A bare consumer in the app's group with ``instance_id`` as its static id, polled
    until the broker has given it the group's partitions (fencing the member it replaced)."""
    consumer = Consumer(
        settings.kafka_config(
            **{
                "group.id": f"{settings.topic_prefix}{app.name}",
                "group.instance.id": instance_id,
                "partition.assignment.strategy": "range",
                "session.timeout.ms": 6000,
                "enable.auto.commit": False,
            }
        )
    )
    consumer.subscribe(list(app.input_topics))
    wait_until(lambda: consumer.poll(0.2) is None and bool(consumer.assignment()), 60)
    return consumer


def test_a_fenced_static_consumer_starts_over_and_goes_on(toy: tuple[Settings, ToyApp]) -> None:
    settings, app = toy
    produce_records(settings, [record(f"k{n}", f"before-{n}") for n in range(6)])
    processor: ToyProcessor = Processor(
        settings, app, instance_id="a", static_membership=True, commit_interval_ms=50
    )
    running = Running(processor)
    try:
        wait_until(lambda: processor.stats.records >= 6, timeout_s=60)
        restarts = processor.stats.restarts

        intruder(settings, app, "a").close()  # a static member's close does not leave
        produce_records(settings, [record(f"k{n}", f"after-{n}") for n in range(6)])

        wait_until(lambda: processor.stats.records >= 12 or not running.thread.is_alive(), 90)
        assert running.error is None
        assert processor.stats.restarts > restarts
        assert processor.status.snapshot().phase is Phase.RUNNING
    finally:
        running.stop()
    counts = admitted(settings)
    assert sorted(counts) == sorted(
        [f"before-{n}" for n in range(6)] + [f"after-{n}" for n in range(6)]
    )
    assert set(counts.values()) == {1}


def test_of_two_live_instances_with_one_id_the_first_stops(
    toy: tuple[Settings, ToyApp], tmp_path: object
) -> None:
    settings, app = toy
    first_host = dataclasses.replace(settings, state_dir=settings.state_dir / "first")
    second_host = dataclasses.replace(settings, state_dir=settings.state_dir / "second")
    produce_records(settings, [record(f"k{n}", f"before-{n}") for n in range(6)])
    first: ToyProcessor = Processor(
        first_host, app, instance_id="a", static_membership=True, commit_interval_ms=50
    )
    a = Running(first)
    wait_until(lambda: first.stats.records >= 6, timeout_s=60)

    second: ToyProcessor = Processor(
        second_host, app, instance_id="a", static_membership=True, commit_interval_ms=50
    )
    b = Running(second)
    try:
        a.thread.join(90)
        assert not a.thread.is_alive(), "the first instance went on beside the second"
        assert isinstance(a.error, ProcessorFenced), a.error
        produce_records(settings, [record(f"k{n}", f"after-{n}") for n in range(6)])
        wait_until(lambda: second.stats.records >= 6 or not b.thread.is_alive(), 90)
        assert b.error is None
        assert b.thread.is_alive()
    finally:
        b.stop()
        first.stop()
    counts = admitted(settings)
    assert set(counts.values()) == {1}
    assert len(counts) == 12
