"""Helpers for tests on the real broker: isolated prefixes, topics and read-back."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Iterable

from confluent_kafka import (
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    OffsetSpec,
)
from confluent_kafka.cimpl import NewTopic

from streams.kafka.clients import admin_client
from streams.kafka.consuming import take
from streams.settings import Settings, load_settings

# Every prefix this test process handed out; the session's end deletes their topics
# (tests/conftest.py), so a developer's broker does not pile up test partitions.
ISSUED_PREFIXES: set[str] = set()


def new_prefix() -> str:
    """A topic prefix no other test uses, remembered for the end-of-session cleanup."""
    prefix = f"t-{uuid.uuid4().hex[:10]}."
    ISSUED_PREFIXES.add(prefix)
    return prefix


def delete_issued_topics(
    settings: Settings, prefixes: Iterable[str] | None = None, timeout_s: float = 60.0
) -> int:
    """Delete every topic under ``prefixes`` (default: every prefix this process issued);
    the number deleted.

    Best effort: a broker that is down or slow leaves the topics for ``make reset``.
    """
    chosen = tuple(ISSUED_PREFIXES if prefixes is None else prefixes)
    if not chosen:
        return 0
    admin = AdminClient(settings.kafka_config())
    names = [name for name in admin.list_topics(timeout=10).topics if name.startswith(chosen)]
    if names:
        for future in admin.delete_topics(names, operation_timeout=timeout_s).values():
            # Cleanup never fails the session; what it leaves, `make reset` removes.
            with contextlib.suppress(Exception):
                future.result()
    return len(names)


def unique_settings(partitions: int = 3, **env: str) -> Settings:
    """Settings with a topic prefix no other test uses, and a private state directory."""
    prefix = new_prefix()
    base = {
        "SLUICEGATE_TOPIC_PREFIX": prefix,
        "SLUICEGATE_PARTITIONS": str(partitions),
        "SLUICEGATE_STATE_DIR": f"var/test-state/{prefix}",
    }
    base.update(env)
    return load_settings(base)


def create_topics(settings: Settings, specs: Iterable[tuple[str, int, bool]]) -> None:
    """Create (full name, partitions, compacted) topics for a test."""
    admin = AdminClient(settings.kafka_config())
    new = [
        NewTopic(
            name,
            num_partitions=partitions,
            replication_factor=1,
            config={"cleanup.policy": "compact" if compacted else "delete"},
        )
        for name, partitions, compacted in specs
    ]
    for future in admin.create_topics(new).values():
        future.result()


def read_topic(
    settings: Settings, topic: str, *, committed_only: bool = True, timeout_s: float = 30.0
) -> list[Message]:
    """Every record of ``topic`` up to its current end (read_committed by default)."""
    consumer = Consumer(
        settings.kafka_config(
            **{
                "group.id": f"reader-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                # The end of a partition that ends with a commit marker is known only from
                # the fetch that finds nothing more: the broker holds that one this long
                # (500 ms by default, so every read of a topic took half a second).
                "fetch.wait.max.ms": 10,
                "isolation.level": "read_committed" if committed_only else "read_uncommitted",
            }
        )
    )
    try:
        metadata = consumer.list_topics(topic, timeout=10).topics[topic]
        partitions = sorted(metadata.partitions)
        ends = {}
        for p in partitions:
            ends[p] = high_watermark(consumer, TopicPartition(topic, p))
        pending = {p for p in partitions if ends[p] > 0}
        consumer.assign([TopicPartition(topic, p, 0) for p in pending])
        out: list[Message] = []
        deadline = time.monotonic() + timeout_s
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic}: partitions {sorted(pending)} not at end")
            # take(), not consume(10_000, 0.5): consume waits for 10,000 records or the whole
            # timeout, so every read of a short topic took at least half a second.
            for msg in take(consumer, 10_000, 0.5):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        pending.discard(msg.partition() or 0)
                        continue
                    raise RuntimeError(err.str())
                out.append(msg)
                partition, offset = msg.partition(), msg.offset()
                if partition is not None and offset is not None and offset >= ends[partition] - 1:
                    pending.discard(partition)
        return out
    finally:
        consumer.close()


# A partition created a moment ago may not have its leader yet: the broker answers "not
# leader" (or "unknown partition") for a short while, which a test must wait out.
_TRANSIENT = {
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError._UNKNOWN_PARTITION,
}


def high_watermark(consumer: Consumer, partition: TopicPartition, timeout_s: float = 15.0) -> int:
    """The partition's high watermark, retried while the broker says it has no leader yet."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            _, high = consumer.get_watermark_offsets(partition, timeout=10, cached=False)
            return int(high)
        except KafkaException as e:
            if e.args[0].code() not in _TRANSIENT or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def wait_until(
    predicate: object,
    timeout_s: float = 60.0,
    interval_s: float = 0.2,
    *,
    what: str = "the condition",
) -> None:
    """Poll ``predicate()`` until it is truthy; after ``timeout_s`` raise ``TimeoutError``
    saying "waited <timeout_s> s for <what>"."""
    deadline = time.monotonic() + timeout_s
    while True:
        if predicate():  # type: ignore[operator]
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout_s} s for {what}")
        time.sleep(interval_s)


def wait_until_stable(settings: Settings, topics: set[str], timeout_s: float = 30.0) -> None:
    """Wait until no partition of ``topics`` holds an unresolved transaction: its last stable
    offset (the read_committed end) equals its high watermark.

    ``commit_transaction`` returns once the coordinator has logged the decision; it writes the
    markers to the partitions a moment later, and until then a read_committed end offset
    stops before the transaction (a projector caught up "to the end" would stop short)."""
    wait_until(stability(settings, topics), timeout_s, interval_s=0.02)


def stability(settings: Settings, topics: set[str]) -> Callable[[], bool]:
    """A check, to call as often as needed, of whether every partition of ``topics`` is
    stable: no unresolved transaction, its last stable offset equal to its high watermark."""
    admin = admin_client(settings)
    described = admin.list_topics(timeout=10).topics
    latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
    request = {
        TopicPartition(t, p): latest for t in sorted(topics) for p in described[t].partitions
    }

    def ends(level: IsolationLevel) -> dict[tuple[str, int], int]:
        found = admin.list_offsets(request, isolation_level=level, request_timeout=10)
        return {(tp.topic, tp.partition): int(f.result().offset) for tp, f in found.items()}

    return lambda: ends(IsolationLevel.READ_COMMITTED) == ends(IsolationLevel.READ_UNCOMMITTED)


def set_topic_config(settings: Settings, short_name: str, config: dict[str, str]) -> None:
    """Set ``config`` (``{"cleanup.policy": "delete", ...}``) on a test's topic, as an
    operator's ``kafka-configs --alter`` would."""
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        settings.topic_named(short_name),
        incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
            for k, v in config.items()
        ],
    )
    admin = AdminClient(settings.kafka_config())  # alive until every future has its answer
    for future in admin.incremental_alter_configs([resource]).values():
        future.result()
    # The answer can come before a DescribeConfigs shows the change: wait until it does.
    described = ConfigResource(ConfigResource.Type.TOPIC, settings.topic_named(short_name))

    def visible() -> bool:
        (entries,) = [f.result() for f in admin.describe_configs([described]).values()]
        return all(k in entries and entries[k].value == v for k, v in config.items())

    wait_until(visible, timeout_s=30, what=f"{short_name} to show {config}")


def recreate_topic(settings: Settings, short_name: str, partitions: int) -> None:
    """Delete a test's topic and create it again under its name (empty, a new topic id,
    offsets from 0), as an operator's ``kafka-topics --delete`` and ``--create`` would."""
    topic = settings.topic_named(short_name)
    admin = admin_client(settings)
    for future in admin.delete_topics([topic]).values():
        future.result(timeout=30)
    wait_until(
        lambda: topic not in admin.list_topics(timeout=10).topics, timeout_s=60, what="deleted"
    )
    create_topics(settings, [(topic, partitions, False)])


def expire_records(settings: Settings, topic: str, partition: int, before: int) -> None:
    """Move the start of ``topic`` (short name) partition ``partition`` to offset ``before``,
    as retention deleting its first segments does (``DeleteRecords``)."""
    admin = AdminClient(settings.kafka_config())
    full = settings.topic_named(topic)
    (future,) = admin.delete_records([TopicPartition(full, partition, before)]).values()
    assert future.result(timeout=30).low_watermark == before
