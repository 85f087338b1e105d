"""The exactly-once engine on the real broker, with a toy application.

The toy app (``tests/support/engine_toy.py``) admits each record id once per key (a miniature of run
admission) and fires a timer per key: enough to see exactly-once output, state restore and
timers, without the admission core.
"""

from __future__ import annotations

import dataclasses
import json
import random
import threading
from collections.abc import Iterator

import pytest

from streams.engine.processor import Processor
from streams.errors import ProcessorFenced
from streams.settings import Settings
from tests.support.engine_toy import ToyApp, admitted, produce_records, start
from tests.support.kafka import create_topics, read_topic, unique_settings, wait_until

pytestmark = pytest.mark.integration


@pytest.fixture()
def toy() -> Iterator[tuple[Settings, ToyApp]]:
    settings = unique_settings(partitions=3)
    create_topics(
        settings,
        [
            (settings.topic_named("in"), 3, False),
            (settings.topic_named("changelog"), 3, True),
            (settings.topic_named("out"), 3, False),
            (settings.topic_named("dead-letters"), 1, False),
        ],
    )
    yield settings, ToyApp(settings)


def test_duplicates_are_admitted_once_across_a_restart(toy: tuple[Settings, ToyApp]) -> None:
    settings, app = toy
    rng = random.Random(7)
    ids = [f"id-{i}" for i in range(600)]
    first = [(f"k{rng.randrange(40)}", i) for i in ids]
    key_of = dict((i, k) for k, i in first)
    batch = [(k, json.dumps({"key": k, "id": i}).encode()) for k, i in first]
    batch += [(key_of[i], json.dumps({"key": key_of[i], "id": i}).encode()) for i in ids[:200]]
    batch.append(("k0", b"not json"))
    rng.shuffle(batch)
    produce_records(settings, batch)

    processor = Processor(settings, app, instance_id="a", batch_size=100)
    thread = start(processor)
    wait_until(lambda: processor.stats.records >= len(batch), timeout_s=60)
    processor.stop()
    thread.join(30)
    assert processor.stats.dead_letters == 1

    # A new instance restores the state from the changelog: the repeats stay repeats. (Another
    # instance id: "a" restarted would keep its local store and read nothing, see
    # test_engine_checkpoint.py.)
    again = [(key_of[i], json.dumps({"key": key_of[i], "id": i}).encode()) for i in ids[100:400]]
    produce_records(settings, again)
    second = Processor(settings, app, instance_id="b", batch_size=100)
    thread = start(second)
    wait_until(lambda: second.stats.records >= len(again), timeout_s=60)
    second.stop()
    thread.join(30)

    counts = admitted(settings)
    assert set(counts) == set(ids)
    assert set(counts.values()) == {1}
    assert second.stats.restored_records > 0
    (letter,) = read_topic(settings, settings.topic_named("dead-letters"))
    assert letter.value() == b"not json"
    assert dict(letter.headers() or [])["sluicegate.kind"] == b"undecodable"


def test_timers_fire_once_per_key(toy: tuple[Settings, ToyApp]) -> None:
    settings, app = toy
    clock = [1_000_000]
    produce_records(
        settings,
        [(f"k{i}", json.dumps({"key": f"k{i}", "id": f"x{i}"}).encode()) for i in range(9)],
    )
    processor = Processor(settings, app, instance_id="t", clock=lambda: clock[0])
    thread = start(processor)
    wait_until(lambda: processor.stats.records >= 9)
    assert processor.stats.timers_fired == 0
    clock[0] += 60  # past every key's due time; the engine fires each timer once
    wait_until(lambda: processor.stats.timers_fired >= 9)
    clock[0] += 10_000
    produce_records(settings, [("k0", json.dumps({"key": "k0", "id": "late"}).encode())])
    wait_until(lambda: processor.stats.records >= 10)
    processor.stop()
    thread.join(30)
    ticks = [
        m
        for m in read_topic(settings, settings.topic_named("out"))
        if b'"ticked"' in (m.value() or b"")
    ]
    assert len(ticks) == 9
    assert processor.stats.timers_fired == 9


def test_a_second_instance_with_the_same_id_fences_the_first(
    toy: tuple[Settings, ToyApp],
) -> None:
    settings, app = toy
    produce_records(settings, [("k", json.dumps({"key": "k", "id": "1"}).encode())])
    first = Processor(settings, app, instance_id="same")
    errors: list[BaseException] = []

    def run_first() -> None:
        try:
            first.run()
        except BaseException as e:
            errors.append(e)

    thread = threading.Thread(target=run_first, daemon=True)
    thread.start()
    wait_until(lambda: first.stats.records >= 1)

    # As on another host: on this one, the first's lock on its state directory would stop
    # the second before it touches Kafka (test_instance_lock.py).
    elsewhere = dataclasses.replace(settings, state_dir=settings.state_dir / "elsewhere")
    second = Processor(elsewhere, app, instance_id="same")
    second_thread = start(second)
    # The second holds partitions only after it initialised its transactions, which fences
    # the first. Records produced before that could all be committed by the first, which
    # would then have nothing left to write and never learn it is fenced (seen in CI).
    wait_until(lambda: bool(second.stats.assigned), timeout_s=60)
    # Keys on every partition, so whichever partitions the first keeps, it must commit again.
    produce_records(
        settings,
        [(f"k{n}", json.dumps({"key": f"k{n}", "id": str(n)}).encode()) for n in range(2, 30)],
    )
    thread.join(60)
    assert not thread.is_alive()
    assert errors and isinstance(errors[0], ProcessorFenced)
    wait_until(lambda: second.stats.records >= 1, timeout_s=60)
    second.stop()
    second_thread.join(30)
    counts = admitted(settings)
    assert set(counts.values()) == {1}
