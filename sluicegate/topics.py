"""The one declarative list of Sluicegate's topics, applied idempotently.

``ensure_topics`` creates what is missing, raises the partition count where a topic has
fewer than declared (never lowers it), and then checks that every co-partitioned group
shares one partition count: the processor keeps state per input partition, so a delivery
and the branch results of its run must land on the same partition number.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewPartitions, NewTopic

from sluicegate.config import Settings
from sluicegate.errors import SluicegateError

DAY_MS = 86_400_000


class TopicError(SluicegateError):
    """Topics could not be created or do not have the shape Sluicegate needs."""


@dataclass(frozen=True)
class TopicSpec:
    """One topic: ``partitions=None`` means the configured default partition count."""

    name: str
    partitions: int | None = None
    compacted: bool = False
    retention_ms: int = 7 * DAY_MS
    copartition_group: str | None = None

    def config(self) -> dict[str, str]:
        if self.compacted:
            return {"cleanup.policy": "compact", "min.compaction.lag.ms": "0"}
        return {"cleanup.policy": "delete", "retention.ms": str(self.retention_ms)}


# Everything keyed by admission key shares the "admission" group.
TOPICS: tuple[TopicSpec, ...] = (
    TopicSpec("workflows", partitions=1, compacted=True),
    TopicSpec("deliveries", retention_ms=14 * DAY_MS, copartition_group="admission"),
    TopicSpec("branch-results", retention_ms=14 * DAY_MS, copartition_group="admission"),
    TopicSpec("admission-changelog", compacted=True, copartition_group="admission"),
    TopicSpec("runs", retention_ms=30 * DAY_MS, copartition_group="admission"),
    TopicSpec("tasks", retention_ms=14 * DAY_MS, copartition_group="admission"),
    TopicSpec("dead-letters", partitions=1, retention_ms=30 * DAY_MS),
)


def topic_names(settings: Settings) -> dict[str, str]:
    """Short name -> full topic name under the configured prefix."""
    return {spec.name: settings.topic(spec.name) for spec in TOPICS}


def _wait(futures: Mapping[str, Future[object]], ignore: Iterable[str]) -> None:
    ignored = set(ignore)
    for name, future in futures.items():
        try:
            future.result()
        except KafkaException as e:
            if e.args[0].name() not in ignored:
                raise TopicError(f"topic {name}: {e.args[0].str()}") from e


def ensure_topics(settings: Settings, timeout_s: float = 30.0) -> dict[str, int]:
    """Create or widen every declared topic; return full name -> partition count.

    Raises :class:`TopicError` if a co-partitioned group disagrees after the change (for
    example a topic created by hand with more partitions): fix it by giving every topic of
    the group the same count, or by choosing another ``SLUICEGATE_TOPIC_PREFIX``.
    """
    admin = AdminClient(settings.kafka_config())
    wanted = {settings.topic(s.name): s for s in TOPICS}
    try:
        existing = admin.list_topics(timeout=timeout_s).topics
    except KafkaException as e:
        raise TopicError(f"cannot reach Kafka at {settings.kafka}: {e.args[0].str()}") from e

    missing = [
        NewTopic(
            name,
            num_partitions=spec.partitions or settings.partitions,
            replication_factor=-1,
            config=spec.config(),
        )
        for name, spec in wanted.items()
        if name not in existing
    ]
    if missing:
        _wait(admin.create_topics(missing, request_timeout=timeout_s), ["TOPIC_ALREADY_EXISTS"])

    counts = _partition_counts(admin, wanted, timeout_s)
    grow = [
        NewPartitions(name, spec.partitions or settings.partitions)
        for name, spec in wanted.items()
        if counts[name] < (spec.partitions or settings.partitions)
    ]
    if grow:
        _wait(admin.create_partitions(grow, request_timeout=timeout_s), [])
        counts = _partition_counts(admin, wanted, timeout_s)
    check_copartitioning(counts, settings)
    return counts


def _partition_counts(
    admin: AdminClient, wanted: dict[str, TopicSpec], timeout_s: float
) -> dict[str, int]:
    """Partition counts, once every partition of every wanted topic has a leader.

    A topic created a moment ago answers "not leader" until its leaders are elected; callers
    of :func:`ensure_topics` may use the topics as soon as it returns.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        metadata = admin.list_topics(timeout=timeout_s).topics
        absent = [name for name in wanted if name not in metadata]
        leaderless = [
            name
            for name in wanted
            if name in metadata
            and (
                metadata[name].error is not None
                or any(p.leader < 0 for p in metadata[name].partitions.values())
            )
        ]
        if not absent and not leaderless:
            return {name: len(metadata[name].partitions) for name in wanted}
        if time.monotonic() > deadline:
            raise TopicError(
                f"topics not ready after {timeout_s:.0f} s: {', '.join(absent + leaderless)}"
            )
        time.sleep(0.1)


def check_copartitioning(counts: dict[str, int], settings: Settings) -> None:
    """Raise :class:`TopicError` unless every co-partitioned group shares a partition count."""
    groups: dict[str, dict[str, int]] = {}
    for spec in TOPICS:
        if spec.copartition_group:
            name = settings.topic(spec.name)
            groups.setdefault(spec.copartition_group, {})[name] = counts[name]
    for group, members in groups.items():
        if len(set(members.values())) > 1:
            shown = ", ".join(f"{n}={c}" for n, c in sorted(members.items()))
            raise TopicError(
                f"co-partitioned group {group!r} has different partition counts ({shown}); "
                "give them one count or use a fresh SLUICEGATE_TOPIC_PREFIX"
            )
