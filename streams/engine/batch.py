"""What a transaction decides: input records, due timers, and isolated poison records.

Items keep their order: due timers first, then effect answers (``effects.py``), then the inputs
in consumption order, so any prefix of a batch is itself a valid batch (the per-partition order
and the offsets to commit follow from it). That is what lets the processor decide a batch in
parts to isolate a record.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from confluent_kafka import KafkaError, Message

from streams.engine.app import InputError, StreamApp
from streams.errors import ConsumerFailed, FatalKafkaError
from streams.kafka.headers import MOVED, UNREAD

log = logging.getLogger("sluicegate.processor")


class Input(NamedTuple):
    """A consumed record; ``record`` is ``None`` when it could not be read (``problem``).

    A named tuple: one is built per consumed record, at about a third of a frozen
    dataclass's cost."""

    message: Message
    topic: str
    partition: int
    offset: int
    key: str
    record: object | None
    problem: str | None

    @property
    def input(self) -> Input:
        return self

    def origin(self) -> str:
        return f"{self.topic}[{self.partition}]@{self.offset}"


class Stopped(NamedTuple):
    """A partition the consumer stopped fetching because its position was out of range:
    :func:`~streams.engine.gaps.resume_stopped` finds where it goes on. Nothing more of it
    comes in the batch that reports it."""

    topic: str
    partition: int


class Expired(NamedTuple):
    """Input records that left the topic before this instance read them (``gaps.py``):
    decided as a dead letter without a value, and committed like a record, moving the
    partition's offset to ``next``.

    ``next`` below ``first`` means the partition now ends before the position it was read
    to (the topic was deleted and created again, or truncated): nothing went unread, it is
    read again from its start."""

    topic: str
    partition: int
    first: int
    next: int
    reason: str
    key: str = ""

    @property
    def input(self) -> None:
        return None

    @property
    def offsets(self) -> int:
        """How many offsets went unread (a transactional topic's commit markers among them)."""
        return max(self.next - self.first, 0)

    def origin(self) -> str:
        span = f"{self.first}..{self.next - 1}" if self.offsets else str(self.first)
        return f"{self.topic}[{self.partition}]@{span}"

    @property
    def kind(self) -> str:
        """Its dead letter's kind: offsets that went unread, or a move back to a start."""
        return UNREAD if self.offsets else MOVED


@dataclass(frozen=True)
class Timer:
    """A due timer: the store key of the timer entry and the state key it fires for."""

    partition: int
    timer: str
    key: str

    @property
    def input(self) -> None:
        return None

    def origin(self) -> str:
        return f"timer {self.timer} (partition {self.partition})"


@dataclass(frozen=True)
class Answer:
    """A command for one key from outside the input topics: an effect's answer, or a command
    an app asked for when the key was restored. Decided like an input, without an offset;
    ``epoch`` is the assignment of ``partition`` it belongs to (stale ones are dropped)."""

    partition: int
    key: str
    command: object
    epoch: int

    @property
    def input(self) -> None:
        return None

    def origin(self) -> str:
        return f"answer for {self.key} (partition {self.partition})"


@dataclass(frozen=True)
class Isolated:
    """An item that can never be recorded, with the outcome it gets instead: a dead letter
    with ``reason`` (and, unless ``bare``, its original bytes and the app's events for it);
    ``silent`` records nothing but its offset (the last resort)."""

    item: Input | Expired | Timer | Answer
    reason: str
    bare: bool
    silent: bool = False

    @property
    def input(self) -> Input | None:
        return self.item.input

    def origin(self) -> str:
        return self.item.origin()


Item = Input | Expired | Timer | Answer | Isolated


def expired_in(item: Item) -> Expired | None:
    """The gap ``item`` records, isolated or not."""
    inner = item.item if isinstance(item, Isolated) else item
    return inner if isinstance(inner, Expired) else None


@dataclass
class ProcessorStats:
    """Counters an operator (and the drills) can read; updated after each commit."""

    records: int = 0
    events: int = 0
    timers_fired: int = 0
    answers: int = 0
    batches: int = 0
    aborts: int = 0
    producers_renewed: int = 0
    """Producers replaced after the broker aborted a transaction that outlived its timeout."""
    restarts: int = 0
    """Times the instance started over in place: a transaction's outcome was unknown, a
    restore timed out, or the broker fenced its consumer."""
    dead_letters: int = 0
    isolated: int = 0
    expired: int = 0
    """Input offsets that left their topic before they were read: their records were never
    decided (each gap has a dead letter, ``gaps.py``)."""
    forwarded: int = 0
    """Inputs on a partition their key does not belong to, forwarded to theirs (``deciding.py``)."""
    restored_records: int = 0
    restore_seconds: float = 0.0
    assigned: list[int] = field(default_factory=list)

    def count(self, items: Sequence[Item], events: int) -> None:
        """Count a committed transaction of ``items`` that produced ``events``."""
        self.batches += 1
        self.events += events
        for item in items:
            if item.input is not None:
                self.records += 1
            if isinstance(item, Timer):
                self.timers_fired += 1
            elif isinstance(item, Answer):
                self.answers += 1
            elif isinstance(item, Isolated):
                self.isolated += 1
                self.dead_letters += 0 if item.silent else 1
                if isinstance(item.item, Expired):
                    self.expired += item.item.offsets
            elif isinstance(item, Expired):
                self.dead_letters += 1
                self.expired += item.offsets
            elif item.record is None:
                self.dead_letters += 1


def restored(stats: ProcessorStats, records: int, seconds: float, assigned: list[int]) -> None:
    stats.restored_records += records
    stats.restore_seconds += seconds
    stats.assigned = assigned


def read(
    app: StreamApp[Any, Any, Any],
    msg: Message,
    stores: Mapping[int, object],
    stopped: list[Stopped],
) -> Input | None:
    """The item for a consumed message; ``None`` for events and foreign partitions. A held
    partition whose position was out of range is added to ``stopped`` (``gaps.py``).

    Raises :class:`~streams.errors.ConsumerFailed` when the consumer can never be used again
    (its fatal errors come with ``fatal()`` false: the code says it), and
    :class:`~streams.errors.FatalKafkaError` for any other fatal error."""
    err = msg.error()
    if err is not None:
        code = err.code()
        if code == KafkaError._PARTITION_EOF:
            return None
        if code == KafkaError._AUTO_OFFSET_RESET:
            topic, partition = msg.topic(), msg.partition()
            if topic is not None and partition is not None and partition in stores:
                stopped.append(Stopped(topic, partition))
            return None
        if code == KafkaError._FATAL:
            raise ConsumerFailed(err.str())
        if err.fatal():
            raise FatalKafkaError(f"consumer: {err.str()}")
        log.warning("consumer error (librdkafka retries): %s", err.str())
        return None
    topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
    if topic is None or partition is None or offset is None or partition not in stores:
        return None
    raw_key, value = msg.key(), msg.value()
    key = "" if raw_key is None else bytes(raw_key).decode("utf-8", errors="replace")
    if raw_key is None or value is None:
        return Input(msg, topic, partition, offset, key, None, "record without key or value")
    try:
        return Input(msg, topic, partition, offset, key, app.decode_input(value), None)
    except InputError as e:
        return Input(msg, topic, partition, offset, key, None, str(e))
