"""Deciding one item of a batch: the app's decide/evolve, its timers, and dead letters.

Everything here runs inside an open transaction. Events go to ``emit`` (the processor's
transactional produce), state changes into the partition's store buffer, which the processor
turns into changelog records before committing. Nothing here commits or aborts.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Generic, Protocol, TypeVar

from streams.engine.app import StreamApp
from streams.engine.batch import Input, Isolated, Item, Timer
from streams.engine.store import PartitionStore, state_key, timer_key

log = logging.getLogger("sluicegate.processor")

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
    """Applies items to the stores of the assigned partitions (``stores`` is live)."""

    def __init__(
        self,
        app: StreamApp[S, C, E],
        stores: Mapping[int, PartitionStore],
        dead_letter_topic: str,
        emit: Emit,
    ) -> None:
        self.app = app
        self.stores = stores
        self.dead_letter_topic = dead_letter_topic
        self.emit = emit

    def apply(self, item: Item, now: int) -> int:
        """Decide ``item`` (produce its events, buffer its state); the events produced."""
        if isinstance(item, Timer):
            store = self.stores[item.partition]
            store.put(item.timer, None)
            return self._handle(store, item.key, self.app.timer_command(), now, fired=True)
        if isinstance(item, Isolated):
            return self._isolated(item, now)
        if item.record is None:
            # Undecodable input is kept, not dropped: an operator can replay it once fixed.
            self.dead_letter(item, item.problem or "undecodable", with_value=True)
            log.warning("dead-lettered %s: %s", item.origin(), item.problem)
            return 0
        command = self.app.to_command(item.record)
        if command is None:
            return 0
        return self._handle(self.stores[item.partition], item.key, command, now, fired=False)

    def _isolated(self, item: Isolated, now: int) -> int:
        if item.silent:
            return 0
        if isinstance(item.item, Timer):
            self.stores[item.item.partition].put(item.item.timer, None)
            self.dead_letter(item.item, item.reason, with_value=False)
            return 0
        self.dead_letter(item.item, item.reason, with_value=not item.bare)
        if item.bare or item.item.record is None:
            return 0
        events = self.app.undecidable(item.item.record, item.reason, now)
        for event in events:
            route = self.app.route(event)
            if route is not None:
                self.emit(route.topic, route.key, self.app.encode_event(event), None)
        return len(events)

    def _handle(self, store: PartitionStore, key: str, command: C, now: int, *, fired: bool) -> int:
        skey = state_key(key)
        raw = store.get(skey)
        state = None if raw is None else self.app.decode_state(raw)
        old_due = None if state is None else self.app.next_due_ms(state)
        events = self.app.decide(state, command, now)
        for event in events:
            state = self.app.evolve(state, event)
            route = self.app.route(event)
            if route is not None:
                self.emit(route.topic, route.key, self.app.encode_event(event), None)
        if not events and not fired:
            return 0
        new_due = None if state is None else self.app.next_due_ms(state)
        if events:
            store.put(skey, None if state is None else self.app.encode_state(state))
        if old_due is not None and (old_due != new_due or fired):
            store.put(timer_key(old_due, key), None)
        if new_due is not None:
            if fired and not events and new_due <= now:
                # The core had nothing to do at a due time: never spin on it.
                log.warning("timer for %s due at %d produced nothing; dropped", key, new_due)
            else:
                store.put(timer_key(new_due, key), b"")
        return len(events)

    def dead_letter(self, item: Input | Timer, reason: str, *, with_value: bool) -> None:
        value = item.message.value() if with_value and isinstance(item, Input) else None
        headers = [
            ("sluicegate.reason", reason.encode()),
            ("sluicegate.origin", item.origin().encode()),
        ]
        self.emit(self.dead_letter_topic, item.key, value, None, headers)
