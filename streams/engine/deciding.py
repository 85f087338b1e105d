"""Deciding one item of a batch: the app's decide/evolve, its timers, and dead letters.

An input decides only under the key it names (``app.key_of``: the admission key, scope key
or run id of its payload) and only on the partition that key belongs to (Java's murmur2, as
every Sluicegate producer partitions: :mod:`streams.kafka.partitioner`), because only that
partition's store holds the key's state. A record a producer put elsewhere (an explicit
partition, librdkafka's default CRC32 partitioner) or keyed otherwise would be decided
against no state: for admission, a second run for an occurrence already admitted. It is
forwarded instead, in the same transaction as its consumed offset, under its key to that
key's partition, with its headers and ``sluicegate.forwarded-from: <partition>/<offset>``,
and decided there like any other copy.

Everything here runs inside an open transaction. Events go to ``emit`` (the processor's
transactional produce), state changes into the partition's store buffer, which the processor
turns into changelog records before committing. Nothing here commits or aborts.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Generic, Protocol, TypeVar, cast

from streams.core.partitioning import partition_of
from streams.engine.app import StreamApp
from streams.engine.batch import Answer, Expired, Input, Isolated, Item, Timer
from streams.engine.store import PartitionStore, state_key, timer_key
from streams.kafka.headers import KIND, ORIGIN, REASON, UNDECODABLE, UNRECORDABLE
from streams.kafka.partitioner import murmur2_partitioner

log = logging.getLogger("sluicegate.processor")

OWNER: Callable[[bytes, int], int] = murmur2_partitioner() or partition_of
"""The partition a key belongs to: librdkafka's own partitioner where it can be called."""
FORWARDED_FROM = "sluicegate.forwarded-from"
"""The header a forwarded input carries: ``<partition>/<offset>`` it was consumed at."""
SAY_FORWARDED_EVERY_S = 60.0

S = TypeVar("S")
C = TypeVar("C")
E = TypeVar("E")


class Emit(Protocol):
    """Produce one record in the open transaction (``partition=None``: by key)."""

    def __call__(
        self,
        topic: str,
        key: str,
        value: bytes | None,
        partition: int | None,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> None: ...


class Decider(Generic[S, C, E]):
    """Applies items to the stores of the assigned partitions (``stores`` is live).

    ``produced`` (when not ``None``) collects ``(partition, key, events)`` of every decision
    of the open transaction, for failpoints and effects once it committed; ``hurry`` is set
    when a decision leaves a timer that is already due (the next batch should not wait).
    """

    def __init__(
        self,
        app: StreamApp[S, C, E],
        stores: Mapping[int, PartitionStore],
        dead_letter_topic: str,
        emit: Emit,
        partitions: Callable[[], int],
    ) -> None:
        self.app = app
        self.stores = stores
        self.dead_letter_topic = dead_letter_topic
        self.emit = emit
        self.partitions = partitions
        self.forwarded = 0
        """Inputs forwarded to the partition their key belongs to, in the open transaction."""
        self._said_forwarded_at = -SAY_FORWARDED_EVERY_S
        self._forwarded_unsaid = 0
        self.produced: list[tuple[int, str, Sequence[E]]] | None = None
        self.hurry = False

    def apply(self, item: Item, now: int) -> int:
        """Decide ``item`` (produce its events, buffer its state); the events produced."""
        if isinstance(item, Timer):
            store = self.stores[item.partition]
            store.put(item.timer, None)
            tick = self.app.timer_command()
            return self._handle(store, item.partition, item.key, tick, now, fired=True)
        if isinstance(item, Answer):
            answered = self.stores.get(item.partition)
            if answered is None:
                return 0  # revoked since it was queued: the new owner reconciles
            answer = cast(C, item.command)  # the app's own answer: one of its commands
            return self._handle(answered, item.partition, item.key, answer, now, fired=False)
        if isinstance(item, Isolated):
            return self._isolated(item, now)
        if isinstance(item, Expired):
            self.dead_letter(item, item.kind, item.reason, with_value=False)
            return 0
        if item.record is None:
            # Undecodable input is kept, not dropped: an operator can replay it once fixed.
            self.dead_letter(item, UNDECODABLE, item.problem or "undecodable", with_value=True)
            log.warning("dead-lettered %s: %s", item.origin(), item.problem)
            return 0
        key = self.app.key_of(item.record) or item.key
        owner = OWNER(key.encode(), self.partitions())
        if owner != item.partition or key != item.key:
            self._forward(item, key, owner)
            return 0
        command = self.app.to_command(item.record)
        if command is None:
            return 0
        store = self.stores[item.partition]
        return self._handle(store, item.partition, item.key, command, now, fired=False)

    def _forward(self, item: Input, key: str, owner: int) -> None:
        """Produce ``item`` to partition ``owner`` of its topic under ``key``, value and
        headers as they came."""
        # A consumed message's headers are a list of (name, bytes or None) pairs.
        given = cast(list[tuple[str, bytes | None]], item.message.headers() or [])
        headers = [(name, value or b"") for name, value in given]
        headers.append((FORWARDED_FROM, f"{item.partition}/{item.offset}".encode()))
        self.emit(item.topic, key, item.message.value(), owner, headers)
        self.forwarded += 1
        self._forwarded_unsaid += 1
        moment = time.monotonic()
        if moment - self._said_forwarded_at >= SAY_FORWARDED_EVERY_S:
            log.warning(
                "%d input(s) under another key or on another partition than their own, "
                "forwarded to where they belong (last: %s partition %d offset %d key %r -> "
                "partition %d key %r); their producer must key each record by the key its "
                "payload names and partition by murmur2 of it (librdkafka: "
                "partitioner=murmur2_random; Java's default), or send through ingest or publish",
                self._forwarded_unsaid,
                item.topic,
                item.partition,
                item.offset,
                item.key,
                owner,
                key,
            )
            self._said_forwarded_at, self._forwarded_unsaid = moment, 0

    def _isolated(self, item: Isolated, now: int) -> int:
        if item.silent:
            return 0
        if isinstance(item.item, Timer):
            self.stores[item.item.partition].put(item.item.timer, None)
            self.dead_letter(item.item, UNRECORDABLE, item.reason, with_value=False)
            return 0
        if isinstance(item.item, Answer):
            self.dead_letter(item.item, UNRECORDABLE, item.reason, with_value=False)
            return 0
        if isinstance(item.item, Expired):
            # The gap's own reason first: it names the records that went.
            reason = f"{item.item.reason}; {item.reason}"
            self.dead_letter(item.item, item.item.kind, reason, with_value=False)
            return 0
        self.dead_letter(item.item, UNRECORDABLE, item.reason, with_value=not item.bare)
        if item.bare or item.item.record is None:
            return 0
        events = self.app.undecidable(item.item.record, item.reason, now)
        for event in events:
            route = self.app.route(event)
            if route is not None:
                self.emit(route.topic, route.key, self.app.encode_event(event), None)
        return len(events)

    def _handle(
        self, store: PartitionStore, partition: int, key: str, command: C, now: int, *, fired: bool
    ) -> int:
        skey = state_key(key)
        raw = store.get(skey)
        before = state = None if raw is None else self.app.decode_state(raw)
        old_due = None if state is None else self.app.next_due_ms(state)
        events = self.app.decide(state, command, now)
        if events:
            state = self.app.evolve_all(state, events)
        for event in events:
            route = self.app.route(event)
            if route is not None:
                self.emit(route.topic, route.key, self.app.encode_event(event), None)
        if not events and not fired:
            return 0
        if events and self.produced is not None:
            self.produced.append((partition, key, events))
        new_due = None if state is None else self.app.next_due_ms(state)
        if events and state is not before:
            # Outcome-only events (a duplicate's answer) leave the very same state: writing it
            # again would only repeat its changelog record.
            store.put(skey, None if state is None else self.app.encode_state(state))
        if old_due is not None and (old_due != new_due or fired):
            store.put(timer_key(old_due, key), None)
        if new_due is not None:
            if fired and not events and new_due <= now:
                # The core had nothing to do at a due time: never spin on it.
                log.warning("timer for %s due at %d produced nothing; dropped", key, new_due)
            else:
                if new_due != old_due or fired:
                    # An unchanged due time's entry is in the store already (a fired one
                    # was taken out above): writing it again would only add a changelog
                    # record per duplicate.
                    store.put(timer_key(new_due, key), b"")
                self.hurry = self.hurry or new_due <= now
        return len(events)

    def dead_letter(
        self, item: Input | Expired | Timer | Answer, kind: str, reason: str, *, with_value: bool
    ) -> None:
        """Produce ``item``'s dead letter: ``kind`` (one of ``headers.KINDS``), ``reason`` and
        origin in its headers, its bytes as the value ``with_value`` (an input's only)."""
        value = item.message.value() if with_value and isinstance(item, Input) else None
        headers = [
            (REASON, reason.encode()),
            (ORIGIN, item.origin().encode()),
            (KIND, kind.encode()),
        ]
        self.emit(self.dead_letter_topic, item.key, value, None, headers)
