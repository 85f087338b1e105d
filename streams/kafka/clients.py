"""One factory per kind of Kafka client, so that no component configures one by hand.

What each kind guarantees is set here and cannot be overridden (a ``tuning`` argument that
names one of these settings is a ``ValueError``, a programming error):

* :func:`idempotent_producer`: ``acks=all`` and ``enable.idempotence``, so an acknowledged
  record was written by every in-sync replica and a producer retry never writes it twice;
* :func:`transactional_producer`: the same, plus a ``transactional.id`` (the exactly-once
  engine's producer);
* :func:`read_committed_consumer`: ``isolation.level=read_committed`` (records of aborted
  transactions never arrive) and no automatic offset commits;
* :func:`uncommitted_consumer`: ``read_uncommitted``, for reading true end offsets (high
  watermarks), never for deciding anything;
* :func:`admin_client`.

Every producer partitions with Java's murmur2 (``Settings.producer_config``), so any client
that keys by admission key lands on the same partition number. Settings from
``SLUICEGATE_RDKAFKA_*`` pass through to every client (``Settings.kafka_config``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient

from streams.settings import KafkaConfig, Settings

ErrorCallback = Callable[[KafkaError], None]

IDEMPOTENT: Mapping[str, object] = {"enable.idempotence": True, "acks": "all"}
"""What every producer guarantees."""
TRANSACTION_RETRY: Mapping[str, object] = {"retry.backoff.ms": 2, "retry.backoff.max.ms": 1000}
"""A transactional producer's retry backoff, unless the pass-through settings or tuning set it.

Right after a commit the coordinator is still writing the commit markers and answers the
next transaction's first ``AddPartitionsToTxn``/``AddOffsetsToTxn`` with
``CONCURRENT_TRANSACTIONS``. librdkafka retries that after ``retry.backoff.ms``, 100 ms by
default, so a few percent of transactions took 100 ms more than the rest (at 10 ms,
``send_offsets_to_transaction`` p99 went from 120 ms to 17 to 27 ms). At 1,000 records/s
the markers were still being written for more than half of the transactions, which waited
the whole backoff: on a bare transactional relay (``bench/relay.py``),
``send_offsets_to_transaction`` p50 11.7 ms at 10 ms, 4.0 to 4.6 at 2, 2.3 to 2.6 at 1.
2 ms, because the webhook's latency at 1,000 posts/s went down with it (p50 54.4 to 43.9
ms, p99 180.5 to 136.3, medians of 11 interleaved pairs) and no further at 1 ms (6 pairs).
The backoff still doubles up to ``retry.backoff.max.ms`` while an error lasts."""
READ_COMMITTED: Mapping[str, object] = {
    "isolation.level": "read_committed",
    "enable.auto.commit": False,
}
"""What every deciding or reading consumer guarantees."""
READ_UNCOMMITTED: Mapping[str, object] = {
    "isolation.level": "read_uncommitted",
    "enable.auto.commit": False,
}


def client_config(
    settings: Settings,
    guaranteed: Mapping[str, object],
    named: Mapping[str, object],
    tuning: Mapping[str, object] | None = None,
    *,
    producer: bool = False,
) -> KafkaConfig:
    """One client's configuration: the pass-through settings, its names (ids), its tuning,
    then what its kind guarantees; ``ValueError`` if ``tuning`` names a guaranteed setting."""
    tuned = dict(tuning or {})
    fixed = sorted(set(guaranteed) & set(tuned))
    if fixed:
        raise ValueError(f"{', '.join(fixed)} is fixed by the client kind and cannot be tuned")
    build = settings.producer_config if producer else settings.kafka_config
    return build(**{**named, **tuned, **guaranteed})


def idempotent_producer(
    settings: Settings,
    *,
    client_id: str | None = None,
    error_cb: ErrorCallback | None = None,
    tuning: Mapping[str, object] | None = None,
) -> Producer:
    """A producer whose acknowledged records are on every in-sync replica, written once."""
    named = {} if client_id is None else {"client.id": client_id}
    config: dict[str, object] = dict(
        client_config(settings, IDEMPOTENT, named, tuning, producer=True)
    )
    if error_cb is not None:
        config["error_cb"] = error_cb
    return Producer(config)


def transactional_config(
    settings: Settings,
    *,
    transactional_id: str,
    client_id: str,
    tuning: Mapping[str, object] | None = None,
) -> KafkaConfig:
    """The configuration :func:`transactional_producer` builds its producer from."""
    guaranteed = {**IDEMPOTENT, "transactional.id": transactional_id}
    # A default, not a guarantee: a SLUICEGATE_RDKAFKA_RETRY_BACKOFF_MS setting wins.
    retry = {k: v for k, v in TRANSACTION_RETRY.items() if k not in settings.kafka_extra}
    named = {**retry, "client.id": client_id}
    return client_config(settings, guaranteed, named, tuning, producer=True)


def transactional_producer(
    settings: Settings,
    *,
    transactional_id: str,
    client_id: str,
    tuning: Mapping[str, object] | None = None,
) -> Producer:
    """An idempotent producer with ``transactional_id``; call ``init_transactions`` first."""
    return Producer(
        transactional_config(
            settings, transactional_id=transactional_id, client_id=client_id, tuning=tuning
        )
    )


def read_committed_consumer(
    settings: Settings,
    *,
    group_id: str,
    client_id: str | None = None,
    tuning: Mapping[str, object] | None = None,
) -> Consumer:
    """A consumer that sees committed records only and never commits offsets on its own."""
    named = {"group.id": group_id} | ({} if client_id is None else {"client.id": client_id})
    return Consumer(client_config(settings, READ_COMMITTED, named, tuning))


def uncommitted_consumer(
    settings: Settings, *, group_id: str, tuning: Mapping[str, object] | None = None
) -> Consumer:
    """A consumer for true end offsets (``read_uncommitted`` high watermarks); never commits."""
    return Consumer(client_config(settings, READ_UNCOMMITTED, {"group.id": group_id}, tuning))


def admin_client(settings: Settings) -> AdminClient:
    """An admin client (topic metadata, creation, offsets)."""
    return AdminClient(settings.kafka_config())
