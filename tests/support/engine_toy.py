"""A toy application for engine tests: admits each record id once per key, one timer per key.

Enough to see exactly-once output, state restore, timers, fencing and poison records on the
real broker without the admission core.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Producer

from streams.engine.app import InputError, Route, evolve_each
from streams.engine.processor import Processor
from streams.settings import Settings
from tests.support.kafka import create_topics, read_topic


@dataclass(frozen=True)
class ToyState:
    seen: tuple[str, ...]
    due_ms: int | None


@dataclass(frozen=True)
class Admitted:
    key: str
    record_id: str
    at_ms: int


@dataclass(frozen=True)
class Ticked:
    key: str
    at_ms: int


@dataclass(frozen=True)
class Refused:
    """The toy's answer to a record the engine could not record."""

    key: str
    record_id: str
    reason: str


ToyEvent = Admitted | Ticked | Refused
ToyProcessor = Processor[ToyState, dict[str, str], ToyEvent]


class ToyApp:
    name = "toy"

    def __init__(self, settings: Settings) -> None:
        self.input_topics: Sequence[str] = (settings.topic_named("in"),)
        self.changelog_topic = settings.topic_named("changelog")
        self.out = settings.topic_named("out")

    def decode_input(self, data: bytes) -> object:
        try:
            return json.loads(data)
        except ValueError as e:
            raise InputError(str(e)) from e

    def encode_event(self, event: ToyEvent) -> bytes:
        kind = {Admitted: "admitted", Ticked: "ticked", Refused: "refused"}[type(event)]
        return json.dumps({"kind": kind, **event.__dict__}).encode()

    def prepare(self, records: Sequence[object], now_ms: int) -> None:
        return None

    def to_command(self, record: object) -> dict[str, str] | None:
        return record if isinstance(record, dict) else None

    def key_of(self, record: object) -> str | None:
        return None  # a toy record's message key stands

    def timer_command(self) -> dict[str, str]:
        return {"tick": "yes"}

    def decide(
        self, state: ToyState | None, command: dict[str, str], now_ms: int
    ) -> Sequence[ToyEvent]:
        if "tick" in command:
            if state is not None and state.due_ms is not None and state.due_ms <= now_ms:
                return [Ticked(key="", at_ms=now_ms)]
            return []
        if state is not None and command["id"] in state.seen:
            return []
        return [Admitted(key=command["key"], record_id=command["id"], at_ms=now_ms)]

    def evolve_all(self, state: ToyState | None, events: Sequence[ToyEvent]) -> ToyState | None:
        return evolve_each(self.evolve, state, events)

    def evolve(self, state: ToyState | None, event: ToyEvent) -> ToyState | None:
        if isinstance(event, Refused):
            return state
        if isinstance(event, Ticked):
            return ToyState(seen=state.seen if state else (), due_ms=None)
        seen = (state.seen if state else ()) + (event.record_id,)
        first_due = event.at_ms + 50 if state is None else state.due_ms
        return ToyState(seen=seen, due_ms=first_due)

    def next_due_ms(self, state: ToyState) -> int | None:
        return state.due_ms

    def route(self, event: ToyEvent) -> Route | None:
        return Route(self.out, getattr(event, "key", "") or "tick")

    def encode_state(self, state: ToyState) -> bytes:
        return json.dumps({"seen": list(state.seen), "due": state.due_ms}).encode()

    def decode_state(self, data: bytes) -> ToyState:
        raw = json.loads(data)
        return ToyState(seen=tuple(raw["seen"]), due_ms=raw["due"])

    def undecidable(self, record: object, reason: str, now_ms: int) -> Sequence[ToyEvent]:
        if not isinstance(record, dict) or "id" not in record:
            return []
        # Only the head of the id: the whole record may be what could not be written.
        return [Refused(key=str(record.get("key", "")), record_id=record["id"][:64], reason=reason)]


def create_toy_topics(settings: Settings, partitions: int) -> None:
    """The toy's input, changelog and output topics, and the dead letters."""
    create_topics(
        settings,
        [
            (settings.topic_named("in"), partitions, False),
            (settings.topic_named("changelog"), partitions, True),
            (settings.topic_named("out"), partitions, False),
            (settings.topic_named("dead-letters"), 1, False),
        ],
    )


def record(key: str, record_id: str) -> tuple[str, bytes]:
    return key, json.dumps({"key": key, "id": record_id}).encode()


def produce_records(settings: Settings, records: list[tuple[str, bytes]]) -> None:
    producer = Producer(settings.producer_config(**{"enable.idempotence": True, "linger.ms": 20}))
    for key, value in records:
        while True:
            try:
                producer.produce(settings.topic_named("in"), key=key.encode(), value=value)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(30) == 0


class Running:
    """A processor in a thread that remembers what stopped it."""

    def __init__(self, processor: Processor[Any, Any, Any]) -> None:
        self.processor = processor
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.processor.run()
        except BaseException as e:
            self.error = e

    def stop(self, timeout_s: float = 60.0) -> None:
        self.processor.stop()
        self.thread.join(timeout_s)
        assert not self.thread.is_alive(), "the processor did not stop"


def start(processor: ToyProcessor) -> threading.Thread:
    thread = threading.Thread(target=processor.run, daemon=True)
    thread.start()
    return thread


def out_events(settings: Settings) -> list[dict[str, Any]]:
    return [
        json.loads(m.value() or b"{}") for m in read_topic(settings, settings.topic_named("out"))
    ]


def admitted(settings: Settings) -> Counter[str]:
    out = Counter[str]()
    for body in out_events(settings):
        if body["kind"] == "admitted":
            out[body["record_id"]] += 1
    return out
