"""The gate app on the real broker, with a controllable clock, for tests and drills.

:class:`GateHarness` makes the topics under a fresh prefix, writes admission's hand-offs
(``CandidateProposed`` / ``DispatchRequested`` / ``DispatchWithdrawn``) to ``candidates``
keyed by scope key exactly as the admission app does, runs gate processors in threads, and
reads the committed decisions (``gate-decisions``) and dispatches (``actions``) back.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Producer

from schemas.codec import decode, encode
from schemas.events import (
    ActionDispatched,
    CandidateProposed,
    DispatchRequested,
    DispatchWithdrawn,
)
from schemas.topics import ACTIONS, CANDIDATES, GATE_DECISIONS
from streams.apps.gate import GateApp
from streams.engine.processor import Processor
from streams.kafka.topics import ensure_topics
from streams.settings import Settings
from tests.support.gate import T0
from tests.support.kafka import read_topic, unique_settings, wait_until


@dataclass
class Clock:
    """The gate's ``now``: fixed unless a test moves it."""

    now_ms: int = T0 + 1_000

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, ms: int) -> None:
        self.now_ms += ms


@dataclass
class Decisions:
    """Everything the gate committed, decoded, in each topic's partition order."""

    decisions: list[Any] = field(default_factory=list)
    dispatched: list[ActionDispatched] = field(default_factory=list)

    def of(self, kind: type) -> list[Any]:
        return [d for d in self.decisions if isinstance(d, kind)]

    def for_candidate(self, candidate_id: str) -> list[Any]:
        return [d for d in self.decisions if d.candidate_id == candidate_id] + [
            d for d in self.dispatched if d.action_id == candidate_id
        ]


class GateHarness:
    """Topics under a fresh prefix, the gate's inputs, and gate processors in threads."""

    def __init__(self, partitions: int = 3, clock: Any = None) -> None:
        self.settings: Settings = unique_settings(partitions=partitions)
        ensure_topics(self.settings)
        self.clock = clock if clock is not None else Clock()
        self._producer = Producer(
            self.settings.producer_config(**{"enable.idempotence": True, "linger.ms": 5})
        )
        self.processors: list[tuple[Processor[Any, Any, Any], threading.Thread]] = []

    def send(
        self,
        *records: CandidateProposed | DispatchRequested | DispatchWithdrawn,
        flush: bool = True,
    ) -> None:
        topic = self.settings.topic(CANDIDATES)
        for record in records:
            while True:
                try:
                    self._producer.produce(
                        topic, key=record.scope_key.encode(), value=encode(record)
                    )
                    break
                except BufferError:
                    self._producer.poll(0.05)
        if flush:
            assert self._producer.flush(30) == 0

    def start(self, instance_id: str = "g1", clock: Any = None) -> Processor[Any, Any, Any]:
        processor: Processor[Any, Any, Any] = Processor(
            self.settings,
            GateApp(self.settings),
            instance_id=instance_id,
            clock=clock if clock is not None else self.clock,
            batch_size=200,
        )
        thread = threading.Thread(target=processor.run, daemon=True)
        thread.start()
        self.processors.append((processor, thread))
        return processor

    def stop(self) -> None:
        for processor, thread in self.processors:
            processor.stop()
            thread.join(60)
        self.processors.clear()

    def read(self) -> Decisions:
        return Decisions(
            decisions=[
                decode(m.value() or b"")
                for m in read_topic(self.settings, self.settings.topic(GATE_DECISIONS))
            ],
            dispatched=[
                d
                for m in read_topic(self.settings, self.settings.topic(ACTIONS))
                if isinstance(d := decode(m.value() or b""), ActionDispatched)
            ],
        )

    def wait_for(self, predicate: Any, timeout_s: float = 90.0) -> Decisions:
        seen: list[Decisions] = []

        def check() -> bool:
            seen.append(self.read())
            return bool(predicate(seen[-1]))

        wait_until(check, timeout_s=timeout_s, interval_s=0.3)
        return seen[-1]

    def close(self) -> None:
        self.stop()
        self._producer.flush(10)
