"""Engine effects on the real broker: performed once, only after the commit, never on restore.

The toy app (``tests/engine_toy.py``) gains effects: every ``Admitted`` event asks for one
effect, whose answer (a command for the same key) is decided later into an ``Answered`` event.
The producer is the real one, wrapped so that the first commit fails with an abortable error:
the transaction is aborted and decided again. The effect of the aborted transaction must not
have been performed; the one of its committed retry exactly once; a restart (restore from the
changelog) performs nothing again, and ``on_restored`` commands are decided like answers.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import KafkaError

from streams.engine.processor import Processor
from streams.settings import Settings
from tests.support.engine_toy import (
    Admitted,
    Running,
    ToyApp,
    ToyEvent,
    ToyState,
    create_toy_topics,
    out_events,
    produce_records,
    record,
)
from tests.support.faults import Faulty, kafka_error
from tests.support.kafka import unique_settings, wait_until

pytestmark = pytest.mark.integration


@dataclass(frozen=True)
class Effect:
    key: str
    record_id: str


class EffectToy(ToyApp):
    """ToyApp whose admissions are answered by an effect (see the module docstring)."""

    effect_threads = 2

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.performed: Counter[str] = Counter()
        self.lock = threading.Lock()

    def effects_of(self, events: Sequence[ToyEvent]) -> list[Effect]:
        # An answer is admitted too; it asks for nothing more.
        return [
            Effect(e.key, e.record_id)
            for e in events
            if isinstance(e, Admitted) and not e.record_id.startswith("answer-")
        ]

    def perform(self, effect: Effect) -> dict[str, str]:
        with self.lock:
            self.performed[effect.record_id] += 1
        return {"key": effect.key, "id": f"answer-{effect.record_id}"}

    def expired(self, effect: Effect, now_ms: int) -> None:
        return None

    def on_assigned(self, generation: int) -> None:
        return None

    def on_restored(self, key: str, state: ToyState, now_ms: int) -> dict[str, str] | None:
        return {"key": key, "id": f"restored-{key}"}


@pytest.fixture()
def toy() -> Iterator[tuple[Settings, EffectToy]]:
    settings = unique_settings(partitions=2)
    create_toy_topics(settings, 2)
    yield settings, EffectToy(settings)


def admitted_ids(settings: Settings) -> Counter[str]:
    return Counter(e["record_id"] for e in out_events(settings) if e["kind"] == "admitted")


def test_effects_run_once_after_the_commit_and_never_on_restore(
    toy: tuple[Settings, EffectToy],
) -> None:
    settings, app = toy
    keys = [f"k{n}" for n in range(6)]
    produce_records(settings, [record(k, f"id-{k}") for k in keys])
    processor: Processor[Any, Any, Any] = Processor(settings, app, instance_id="a")
    producer = Faulty(processor._clients.producer)
    processor._clients.producer = producer  # type: ignore[assignment]
    aborted = kafka_error(
        KafkaError._MSG_TIMED_OUT, "injected: the commit failed", txn_requires_abort=True
    )
    producer.plan("commit_transaction", aborted)
    running = Running(processor)
    answers = {f"answer-id-{k}" for k in keys}
    wait_until(lambda: answers <= set(admitted_ids(settings)), timeout_s=60)
    running.stop()
    assert running.error is None
    assert producer.injected, "the injected abort never happened"
    assert processor.stats.aborts >= 1
    # The aborted transaction's events were never performed; the committed retry's once.
    assert app.performed == Counter({f"id-{k}": 1 for k in keys})
    assert admitted_ids(settings) == Counter(
        {**{f"id-{k}": 1 for k in keys}, **dict.fromkeys(answers, 1)}
    )

    # A new instance restores every key from the changelog: nothing is performed again, and
    # each key's on_restored command is decided (and, being an admission, has its effect).
    again = EffectToy(settings)
    second: Processor[Any, Any, Any] = Processor(settings, again, instance_id="a")
    running = Running(second)
    restored = {f"restored-{k}" for k in keys}
    wait_until(lambda: restored <= set(admitted_ids(settings)), timeout_s=60)
    wait_until(lambda: sum(again.performed.values()) >= len(keys), timeout_s=30)
    running.stop()
    assert running.error is None
    assert set(again.performed) == restored  # never the records read back on restore
    assert all(n == 1 for n in admitted_ids(settings).values())
