"""A clean restart keeps the local store and restores only what it lacks; nothing else does.

Each test runs the toy app on the real broker, restarts it in a situation where the local
store may be out of date (another owner in between, a crash, a recreated changelog, a store
that lost writes, hostile checkpoint bytes), and then compares every key of every kept store
with a full restore of the changelog into an empty directory: they must be equal, and every
record admitted exactly once.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from streams.engine.processor import Processor
from streams.engine.restore import Restorer
from streams.engine.store import PartitionStore
from streams.settings import Settings
from tests.support.engine_toy import ToyApp, admitted, produce_records, record, start
from tests.support.kafka import create_topics, read_topic, unique_settings, wait_until

pytestmark = pytest.mark.integration

PARTITIONS = 3


def topics(settings: Settings) -> list[tuple[str, int, bool]]:
    return [
        (settings.topic_named("in"), PARTITIONS, False),
        (settings.topic_named("changelog"), PARTITIONS, True),
        (settings.topic_named("out"), PARTITIONS, False),
        (settings.topic_named("dead-letters"), 1, False),
    ]


@pytest.fixture()
def toy() -> Iterator[tuple[Settings, ToyApp]]:
    settings = unique_settings(partitions=PARTITIONS)
    create_topics(settings, topics(settings))
    yield settings, ToyApp(settings)


def store_dir(settings: Settings, instance: str, partition: int) -> Path:
    return Path(settings.state_dir) / "toy" / instance / f"p{partition}"


def checkpoint_file(settings: Settings, instance: str, partition: int) -> Path:
    return store_dir(settings, instance, partition).with_name(f"p{partition}.checkpoint")


def batch(start_at: int, count: int) -> list[tuple[str, bytes]]:
    return [record(f"k{n % 45}", f"id-{n}") for n in range(start_at, start_at + count)]


def run_until(settings: Settings, app: ToyApp, instance: str, records: int) -> Processor:  # type: ignore[type-arg]
    """Run ``instance`` until it has decided ``records`` records, then stop it cleanly."""
    processor: Processor = Processor(settings, app, instance_id=instance, batch_size=100)  # type: ignore[type-arg]
    thread = start(processor)
    wait_until(lambda: processor.stats.records >= records, timeout_s=90)
    processor.stop()
    thread.join(60)
    assert not thread.is_alive()
    return processor


def changelog_records(settings: Settings) -> int:
    return len(read_topic(settings, settings.topic_named("changelog")))


def assert_equal_to_a_full_restore(settings: Settings, instance: str, scratch: Path) -> int:
    """Every kept store holds exactly what a full restore of its changelog partition holds;
    the number of keys compared."""
    restorer = Restorer(settings, f"{settings.topic_prefix}check", bound_s=60)
    compared = 0
    try:
        for partition in range(PARTITIONS):
            full, _ = restorer.restore(
                settings.topic_named("changelog"),
                partition,
                scratch / f"full-p{partition}",
                count=PARTITIONS,
                deadline=time.monotonic() + 60,
                owner="check",
            )
            kept = PartitionStore(store_dir(settings, instance, partition), fresh=False)
            try:
                assert dict(kept.items("")) == dict(full.items(""))
                compared += full.count("")
            finally:
                kept.close()
                full.close()
    finally:
        restorer.close()
    return compared


def assert_admitted_once(settings: Settings, records: int) -> None:
    counts = admitted(settings)
    assert len(counts) == records
    assert set(counts.values()) == {1}


def test_a_clean_restart_restores_only_what_it_lacks(
    toy: tuple[Settings, ToyApp], tmp_path: Path
) -> None:
    settings, app = toy
    produce_records(settings, batch(0, 600))
    run_until(settings, app, "a", 600)
    whole = changelog_records(settings)

    produce_records(settings, batch(600, 300))
    again = run_until(settings, app, "a", 300)
    print(f"\nclean restart restored {again.stats.restored_records} records of {whole}")
    assert again.stats.restored_records == 0
    assert all(checkpoint_file(settings, "a", p).exists() for p in range(PARTITIONS))
    assert_admitted_once(settings, 900)
    assert assert_equal_to_a_full_restore(settings, "a", tmp_path) > 0


def test_records_another_owner_wrote_in_between_are_read(
    toy: tuple[Settings, ToyApp], tmp_path: Path
) -> None:
    settings, app = toy
    produce_records(settings, batch(0, 600))
    run_until(settings, app, "a", 600)
    before = changelog_records(settings)
    produce_records(settings, batch(600, 300))
    run_until(settings, app, "b", 300)  # another instance (its own directory) owned them
    after = changelog_records(settings)

    produce_records(settings, batch(900, 100))
    back = run_until(settings, app, "a", 100)
    print(f"\n'a' back: restored {back.stats.restored_records} records of {after}")
    assert 0 < back.stats.restored_records <= after - before
    assert_admitted_once(settings, 1000)
    assert_equal_to_a_full_restore(settings, "a", tmp_path)


def test_a_store_in_use_has_no_checkpoint_so_a_crash_restores_in_full(
    toy: tuple[Settings, ToyApp], tmp_path: Path
) -> None:
    settings, app = toy
    produce_records(settings, batch(0, 600))
    run_until(settings, app, "a", 600)
    assert all(checkpoint_file(settings, "a", p).exists() for p in range(PARTITIONS))

    # Restarted: the checkpoints are gone as soon as the stores are opened for processing,
    # so a kill -9 from here on finds none.
    running: Processor = Processor(settings, app, instance_id="a", batch_size=100)  # type: ignore[type-arg]
    thread = start(running)
    wait_until(lambda: len(running.stats.assigned) == PARTITIONS, timeout_s=60)
    assert not any(checkpoint_file(settings, "a", p).exists() for p in range(PARTITIONS))
    # A thread cannot be killed: it stops cleanly (writing checkpoints again), and what a
    # crash would have left is made by deleting them: the stores, without checkpoints.
    running.stop()
    thread.join(60)
    for p in range(PARTITIONS):
        checkpoint_file(settings, "a", p).unlink()

    produce_records(settings, batch(600, 100))
    whole = changelog_records(settings)
    after_crash = run_until(settings, app, "a", 100)
    print(f"\nafter a crash: restored {after_crash.stats.restored_records} records of {whole}")
    assert after_crash.stats.restored_records == whole
    assert_admitted_once(settings, 700)
    assert_equal_to_a_full_restore(settings, "a", tmp_path)


def test_a_changelog_deleted_and_created_again_is_restored_in_full(
    toy: tuple[Settings, ToyApp], tmp_path: Path
) -> None:
    settings, app = toy
    produce_records(settings, batch(0, 300))
    run_until(settings, app, "a", 300)
    changelog = settings.topic_named("changelog")
    admin = AdminClient(settings.kafka_config())
    for future in admin.delete_topics([changelog], operation_timeout=30).values():
        future.result()
    wait_until(lambda: changelog not in admin.list_topics(timeout=10).topics, timeout_s=60)
    wait_until(lambda: _created(settings, changelog), timeout_s=60, interval_s=1.0)
    # The same offsets exist again, holding other keys: only the topic id tells them apart.
    produce_records(settings, batch(300, 300))
    others = run_until(settings, app, "b", 300)
    assert others.stats.restored_records == 0
    whole = changelog_records(settings)

    produce_records(settings, batch(600, 50))
    back = run_until(settings, app, "a", 50)
    print(f"\nrecreated changelog: restored {back.stats.restored_records} records of {whole}")
    assert back.stats.restored_records == whole
    assert_equal_to_a_full_restore(settings, "a", tmp_path)


def _created(settings: Settings, changelog: str) -> bool:
    try:
        create_topics(settings, [(changelog, PARTITIONS, True)])
    except KafkaException:  # the deletion is still under way on the broker
        return False
    return True


@pytest.mark.parametrize(
    "damage",
    ["lost_writes", "hostile_bytes", "out_of_range", "another_owner", "too_old"],
)
def test_a_checkpoint_that_cannot_be_trusted_restores_in_full(
    toy: tuple[Settings, ToyApp], tmp_path: Path, damage: str
) -> None:
    settings, app = toy
    produce_records(settings, batch(0, 300))
    run_until(settings, app, "a", 300)
    whole = changelog_records(settings)
    for p in range(PARTITIONS):
        path = checkpoint_file(settings, "a", p)
        body = json.loads(path.read_bytes())
        if damage == "lost_writes":
            # Written, but the store does not hold everything it says (not flushed).
            body["sequence"] += 7
        elif damage == "out_of_range":
            body["offset"] = whole + 1000
        elif damage == "another_owner":
            body["owner"] = "toy/somebody-else"
        elif damage == "too_old":
            body["written_ms"] -= 8 * 86_400_000
        path.write_bytes(
            b"\x00\xff{not json" * 50 if damage == "hostile_bytes" else json.dumps(body).encode()
        )

    produce_records(settings, batch(300, 30))
    back = run_until(settings, app, "a", 30)
    print(f"\n{damage}: restored {back.stats.restored_records} records of {whole}")
    assert back.stats.restored_records == whole
    assert_admitted_once(settings, 330)
    assert_equal_to_a_full_restore(settings, "a", tmp_path)
