"""The topic catalogue (``schemas.topics``) made real on the broker, idempotently.

``ensure_topics`` creates what is missing and never changes a topic that exists. The
processor keeps state per input partition number, so the topics keyed by admission key (one
co-partitioned group) must share one partition count *for the life of the deployment*: a
delivery and the branch results of its run must land on the same partition number, and the
same one as its earlier copies. Raising the count would move keys to partitions whose state
never saw them, and their copies would be admitted again. So a topic missing from a group is
created with the count its existing members have, and ``sluicegate topics ensure``
(``require_declared_count``) refuses a ``SLUICEGATE_PARTITIONS`` that differs from it.

An existing topic keeps the configuration it was given, so ``ensure_topics`` also reads the
configuration of every compacted topic and refuses one (a changelog, the ``workflows``
table) that lets the broker delete records (``topic_policy.py``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType  # type: ignore[attr-defined]
from confluent_kafka.cimpl import NewTopic

from schemas.topics import TOPICS, Role, TopicSpec
from streams.errors import StreamsError
from streams.kafka.clients import admin_client
from streams.kafka.topic_policy import deletes_records, refusal
from streams.settings import Settings

log = logging.getLogger(__name__)


class TopicError(StreamsError):
    """Topics could not be created or do not have the shape Sluicegate needs."""


def _wait(futures: Mapping[str, Future[object]], ignore: Iterable[str]) -> None:
    ignored = set(ignore)
    for name, future in futures.items():
        try:
            future.result()
        except KafkaException as e:
            if e.args[0].name() not in ignored:
                raise TopicError(f"topic {name}: {e.args[0].str()}") from e


def ensure_topics(
    settings: Settings, timeout_s: float = 30.0, *, require_declared_count: bool = False
) -> dict[str, int]:
    """Create every declared topic that is missing; return full name -> partition count.

    Existing topics are never altered. A missing member of a co-partitioned group gets the
    count of the group's existing members (``SLUICEGATE_PARTITIONS`` only when none exists).
    Raises :class:`TopicError` if a group's existing topics disagree (for example one
    created or altered by hand), if a compacted topic lets the broker delete records (the
    message names the command that fixes it; a configuration that may not be read is logged
    and passed over), and, with ``require_declared_count``, if an existing keyed topic's
    count is not ``SLUICEGATE_PARTITIONS``; the message says how to migrate.
    """
    admin = admin_client(settings)
    wanted = {settings.topic(s): s for s in TOPICS}
    try:
        metadata = admin.list_topics(timeout=timeout_s).topics
    except KafkaException as e:
        raise TopicError(f"cannot reach Kafka at {settings.kafka}: {e.args[0].str()}") from e
    existing = {name: len(metadata[name].partitions) for name in wanted if name in metadata}
    group_counts = _existing_group_counts(existing, settings)
    if require_declared_count:
        _require_declared_count(existing, settings)

    missing = [
        NewTopic(
            name,
            num_partitions=spec.partitions
            or group_counts.get(spec.copartition_group or "", settings.partitions),
            replication_factor=-1,
            config=spec.config(),
        )
        for name, spec in wanted.items()
        if name not in existing
    ]
    if missing:
        _wait(admin.create_topics(missing, request_timeout=timeout_s), ["TOPIC_ALREADY_EXISTS"])
    counts = _partition_counts(admin, wanted, timeout_s)
    check_copartitioning(counts, settings)
    _refuse_deleting_state(admin, wanted, settings, timeout_s)
    return counts


def read_configs(
    admin: AdminClient, topics: Sequence[str], timeout_s: float
) -> dict[str, dict[str, str]]:
    """Each topic's configuration: the entries the broker gives a value (its defaults
    included). Raises ``KafkaException`` or ``TimeoutError`` when it cannot be read."""
    resources = [ConfigResource(ResourceType.TOPIC, topic) for topic in topics]
    futures = admin.describe_configs(resources, request_timeout=timeout_s)
    return {
        resource.name: {
            name: entry.value
            for name, entry in future.result(timeout_s).items()
            if entry.value is not None
        }
        for resource, future in futures.items()
    }


def _refuse_deleting_state(
    admin: AdminClient, wanted: Mapping[str, TopicSpec], settings: Settings, timeout_s: float
) -> None:
    compacted = {name: spec.role for name, spec in wanted.items() if spec.compacted}
    refused = deleting_state(admin, compacted, settings.kafka, timeout_s)
    if refused is not None:
        raise TopicError(refused)


def deleting_state(
    admin: AdminClient, topics: Mapping[str, Role], bootstrap: str, timeout_s: float
) -> str | None:
    """The refusal (``topic_policy.refusal``) for the first of ``topics`` (state topics, by
    role) whose records the broker may delete, naming the others too; ``None`` if they all
    keep their records. A configuration that cannot be read (no ``DescribeConfigs`` right,
    a broker slow to answer) is logged and passed over: this guards against a
    misconfiguration, and what follows meets an unreachable broker anyway."""
    try:
        configs = read_configs(admin, list(topics), timeout_s)
    except (KafkaException, TimeoutError) as e:
        log.warning("cannot read the configuration of %s (%s); unchecked", ", ".join(topics), e)
        return None
    deleting = [(n, why) for n in topics if (why := deletes_records(configs[n])) is not None]
    if not deleting:
        return None
    (first, why), *others = deleting
    also = "".join(f" Also {name} ({more})." for name, more in others)
    return refusal(first, why, bootstrap, topics[first]) + "." + also


def _existing_group_counts(existing: dict[str, int], settings: Settings) -> dict[str, int]:
    """Each co-partitioned group's count, from its existing topics (which must agree)."""
    members: dict[str, dict[str, int]] = {}
    for spec in TOPICS:
        name = settings.topic(spec)
        if spec.copartition_group and name in existing:
            members.setdefault(spec.copartition_group, {})[name] = existing[name]
    for group, counts in members.items():
        _require_one_count(group, counts)
    return {group: next(iter(counts.values())) for group, counts in members.items()}


def _require_declared_count(existing: dict[str, int], settings: Settings) -> None:
    for spec in TOPICS:
        name = settings.topic(spec)
        count = existing.get(name)
        if spec.copartition_group and count is not None and count != settings.partitions:
            raise TopicError(
                f"{name} has {count} partitions, but SLUICEGATE_PARTITIONS is "
                f"{settings.partitions}. Partition counts of keyed topics are never changed: "
                "state is kept per partition number, so keys would move and their copies "
                f"would be admitted again. Keep SLUICEGATE_PARTITIONS={count} for this "
                "deployment; to change the count, start a new deployment under a new "
                f"SLUICEGATE_TOPIC_PREFIX with SLUICEGATE_PARTITIONS={settings.partitions} "
                "and replay the deliveries into it"
            )


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
            name = settings.topic(spec)
            groups.setdefault(spec.copartition_group, {})[name] = counts[name]
    for group, members in groups.items():
        _require_one_count(group, members)


def _require_one_count(group: str, members: dict[str, int]) -> None:
    if len(set(members.values())) > 1:
        shown = ", ".join(f"{n}={c}" for n, c in sorted(members.items()))
        raise TopicError(
            f"co-partitioned group {group!r} has different partition counts ({shown}), so "
            "keys no longer meet their state; no processor will run on them. Start a new "
            "deployment under a new SLUICEGATE_TOPIC_PREFIX and replay the deliveries into it"
        )
