"""The exception root of the ``streams`` package: settings, Kafka clients and topics, the core
(``streams.core.errors.CoreError`` derives from :class:`StreamsError`), the engine, the apps
and the adapters. This module imports nothing, so every layer may raise these.

Driver errors (``confluent_kafka.KafkaException``) are translated here with ``raise ... from e``
so that callers see what happened in Sluicegate's terms. Only :class:`KafkaUnavailable` is
transient and worth retrying; :class:`ProcessorFenced` and :class:`FatalKafkaError` stop
the instance.
"""

from __future__ import annotations


class StreamsError(Exception):
    """Base of every error the streams package raises on purpose."""


class KafkaUnavailable(StreamsError):
    """Kafka did not answer in time. Transient: retry, or check that the broker is up."""


class FatalKafkaError(StreamsError):
    """librdkafka reported a fatal error; the instance must stop. Restart it to recover."""


class ProcessorFenced(StreamsError):
    """Another instance took over this instance's transactional id or partitions.

    The instance stops without writing anything more; this is the zombie protection working.
    Start it again only if no other instance with the same ``--instance-id`` is running.
    (A transaction the broker aborted for outliving its timeout fences the producer too; the
    processor renews its producer then instead of raising this.)
    """


class ConsumerFailed(StreamsError):
    """The group consumer reported a fatal error (librdkafka's ``_FATAL``) and can never be
    used again: the broker fenced it as a static member because a consumer joined with the
    same ``group.instance.id``. A broker restart or an expired session can make librdkafka
    rejoin in a way the broker reads as exactly that, with no other instance anywhere, so
    the processor starts over with a new consumer; fenced again soon after, it stops with
    :class:`ProcessorFenced` (another live instance has its id)."""


class InstanceAlreadyRunning(StreamsError):
    """Another process on this host runs the same instance (same ``--instance-id``, same
    state directory); this one stops before touching Kafka or a store. The message names
    the process. Start this one with another ``--instance-id``, or end the other first (a
    frozen one included: ``kill -9`` releases its lock)."""


class StateRestoreError(StreamsError):
    """A partition's state could not be restored from its changelog; processing must not start.

    Raised as itself for what waiting cannot cure (a changelog or input topic that does not
    exist or may not be read): the instance stops, and the message says what to fix.
    """


class ChangelogDeletesRecords(StateRestoreError):
    """The instance's changelog lets the broker delete records (``cleanup.policy`` with
    ``delete`` and a finite retention): state restored from it may have forgotten what it
    decided, so the instance stops before deciding anything. The message names the topic
    and the command that makes it compacted only."""


class RestoreTimedOut(StateRestoreError):
    """A restore did not finish within its bound (the transaction timeout + 30 s): Kafka was
    out of reach, or a transaction on the partition's offsets or changelog stayed open.

    Transient: the processor starts over in place and tries again (1 s, doubling to 30 s),
    logging this each time. A partition that stays stuck keeps it trying, never processing
    half a state; the message names the partition and the offset it could not pass.
    """


class StateStoreFailed(StreamsError):
    """A partition's local state store (RocksDB) could not be read or written: a full or
    read-only filesystem, an I/O error, files removed under it. The message names the store.

    The instance stops. Nothing is lost and nothing is decided twice: the store is a copy of
    the changelog, its next owner wipes it and restores it from the changelog, and what was
    not committed is consumed and decided again. Fix what the message says (free space on
    the filesystem of ``SLUICEGATE_STATE_DIR``, or point it at another), then start the
    instance again (``sluicegate serve`` does, after its back-off).
    """


class PartitionCountChanged(StreamsError):
    """Co-partitioned topics disagree on their partition count, or differ from the count the
    state was written with. Processing must not start: keys would have moved to partitions
    whose state never saw them, and their copies would be admitted again.

    Partition counts of keyed topics are fixed for the life of a deployment. To change one,
    start a new deployment under a new ``SLUICEGATE_TOPIC_PREFIX`` with the new
    ``SLUICEGATE_PARTITIONS`` and replay the deliveries into it.
    """


class InputTopicRecreated(StreamsError):
    """An input topic was deleted and created again while the instance held its partitions
    (its topic id changed). The batch that found it is aborted and the instance starts over
    in place; its assignment reads the new topic from its start and records the move as a dead
    letter (``positions.py``). Nothing for an operator to do but read that dead letter.
    """


class TransactionUnresolved(StreamsError):
    """A transaction could neither be committed nor aborted in time (or a rewind after an
    abort failed): its outcome is unknown.

    The processor starts over in place, as a restart with the same ``--instance-id`` would:
    initialising its transactions (retried until the broker answers) aborts or completes the
    open one, and its state is restored from the changelog.
    """


class InvalidFilter(StreamsError):
    """A replay filter or option value cannot be used (a bad time, an unknown topic)."""
