"""A Faust app bound to one Sluicegate deployment, and typed topics of its catalogue."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import faust
from confluent_kafka.admin import AdminClient

from consumers.errors import ConsumersError
from consumers.faust_bridge import codec, transport
from schemas.topics import TopicSpec
from streams.settings import Settings


class MissingTopics(ConsumersError):
    """Sluicegate topics a Faust app needs do not exist (or have no partitions yet).

    The operator runs ``sluicegate topics ensure`` with the same ``SLUICEGATE_TOPIC_PREFIX``.
    Faust is never allowed to create them: it would pick its own partition count, and a keyed
    Sluicegate topic's partitions decide which processor owns a run.
    """


def sluicegate_app(settings: Settings, app_id: str, **faust_settings: Any) -> faust.App:
    """A ``faust.App`` for the deployment ``settings`` describe.

    The app's id (its consumer group and the prefix of its own table topics) is ``app_id``
    under the topic prefix. Defaults chosen for Sluicegate, each overridable by keyword:
    at-least-once processing (Sluicegate's exactly-once part is its own processor), no web
    server, in-memory table store (tables restore from their changelog topics), its data
    directory under the state directory, offsets reset to the earliest record, Faust's own topics
    with as many partitions as Sluicegate's. The consumer reads committed records only
    (:mod:`consumers.faust_bridge.transport`), whatever is passed here.
    """
    codec.register()
    transport.register()
    conf: dict[str, Any] = {
        "broker": ";".join(f"{transport.SCHEME}://{host}" for host in settings.kafka.split(",")),
        "store": "memory://",
        "web_enabled": False,
        "topic_partitions": settings.partitions,
        "topic_replication_factor": 1,
        "consumer_auto_offset_reset": "earliest",
        "processing_guarantee": "at_least_once",
        "datadir": str(settings.state_dir / "faust" / app_id),
    }
    conf.update(faust_settings)
    # Faust creates only the last level of its data directory.
    Path(conf["datadir"]).mkdir(parents=True, exist_ok=True)
    if conf["processing_guarantee"] != "at_least_once":
        raise ConsumersError(
            "a Faust app beside Sluicegate runs at_least_once: Faust's exactly_once mode "
            "does not fence zombies by consumer group (docs/design.md)"
        )
    return faust.App(f"{settings.topic_prefix}{app_id}", **conf)


def records(app: faust.App, settings: Settings, spec: TopicSpec) -> faust.TopicT:
    """The Faust topic of a catalogue entry: values are event dataclasses, keys text.

    Raises :class:`MissingTopics` when the topic does not exist on the broker.
    """
    name = settings.topic(spec)
    partitions = existing_partitions(settings, name)
    return app.topic(
        name,
        key_serializer="raw",
        value_serializer=codec.CODEC_NAME,
        partitions=partitions,
        internal=False,
    )


def existing_partitions(settings: Settings, name: str) -> int:
    """The partition count of an existing topic; :class:`MissingTopics` if it has none."""
    admin = AdminClient(settings.kafka_config())
    metadata = admin.list_topics(name, timeout=10).topics.get(name)
    count = 0 if metadata is None or metadata.error is not None else len(metadata.partitions)
    if count == 0:
        raise MissingTopics(
            f"topic {name} does not exist; run `sluicegate topics ensure` with "
            f"SLUICEGATE_TOPIC_PREFIX={settings.topic_prefix!r} first"
        )
    return count
