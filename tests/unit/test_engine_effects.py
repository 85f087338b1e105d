"""The engine's effect runner: per-key order, no head-of-line blocking, ownership, freshness.

No Kafka here: the runner is driven the way the processor drives it (``assigned``, ``submit``
after a commit, ``take`` at the start of a batch), with an app whose ``perform`` records its
calls and can be held on an event. The integration test (``test_engine_effects.py``) runs it
on the broker.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from streams.engine.batch import Answer
from streams.engine.effects import EffectRunner, is_effectful
from streams.engine.failpoints import Failpoints
from streams.engine.store import PartitionStore, state_key


@dataclass(frozen=True)
class Effect:
    key: str
    n: int
    send_by: int = 10**13


@dataclass
class App:
    """Effects are the events themselves; perform blocks on ``gates[key]`` when one is set."""

    effect_threads: int = 4
    performed: list[tuple[str, int]] = field(default_factory=list)
    gates: dict[str, threading.Event] = field(default_factory=dict)
    generations: list[int] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def effects_of(self, events: Sequence[object]) -> list[Effect]:
        return [e for e in events if isinstance(e, Effect)]

    def perform(self, effect: Effect) -> str:
        gate = self.gates.get(effect.key)
        if gate is not None:
            assert gate.wait(10)
        with self.lock:
            self.performed.append((effect.key, effect.n))
        return f"answer {effect.key}#{effect.n}"

    def expired(self, effect: Effect, now_ms: int) -> str | None:
        return f"late {effect.key}#{effect.n}" if now_ms >= effect.send_by else None

    def on_assigned(self, generation: int) -> None:
        self.generations.append(generation)

    def on_restored(self, key: str, state: bytes, now_ms: int) -> str | None:
        return f"recover {key}" if state == b"unfinished" else None

    def decode_state(self, data: bytes) -> bytes:
        return data


def drain(runner: EffectRunner, count: int) -> list[Answer]:
    """Take answers until ``count`` arrived (the workers run concurrently)."""
    got: list[Answer] = []
    for _ in range(1000):
        got.extend(runner.take())
        if len(got) >= count:
            return got
        threading.Event().wait(0.01)
    raise AssertionError(f"only {len(got)} of {count} answers arrived")


def test_the_gateway_app_is_effectful_and_a_plain_app_is_not() -> None:
    assert is_effectful(App())
    assert not is_effectful(object())


def test_effects_of_one_key_run_in_order_and_a_slow_key_blocks_no_other() -> None:
    app = App()
    slow = threading.Event()
    app.gates["slow"] = slow
    runner = EffectRunner(app, clock=lambda: 0, failpoints=Failpoints(), threads=4)
    runner.assigned([0, 1])
    runner.submit([(0, "slow", [Effect("slow", 1), Effect("slow", 2)])])
    runner.submit([(1, "fast", [Effect("fast", n) for n in range(1, 6)])])
    fast = drain(runner, 5)
    assert [a.command for a in fast] == [f"answer fast#{n}" for n in range(1, 6)]
    assert ("slow", 1) not in app.performed  # still waiting, and it held up nobody
    slow.set()
    answers = drain(runner, 2)
    assert [a.command for a in answers] == ["answer slow#1", "answer slow#2"]
    assert all(a.partition == 0 and a.key == "slow" for a in answers)
    runner.close()


def test_a_revoked_partition_performs_nothing_more_and_its_answers_are_dropped() -> None:
    app = App()
    hold = threading.Event()
    app.gates["k"] = hold
    runner = EffectRunner(app, clock=lambda: 0, failpoints=Failpoints(), threads=2)
    runner.assigned([0])
    runner.submit([(0, "k", [Effect("k", 1), Effect("k", 2)])])
    runner.revoked([0])
    runner.assigned([0])  # assigned again: another epoch, another owner's work
    hold.set()
    runner.close()
    # #1 was already running when the partition went; #2 never started.
    assert app.performed in ([], [("k", 1)])
    assert ("k", 2) not in app.performed
    assert runner.take() == []
    assert runner.stats.dropped >= 1
    assert app.generations == [1, 2]


def test_a_late_effect_is_answered_by_the_app_and_never_performed() -> None:
    app = App()
    runner = EffectRunner(app, clock=lambda: 5_000, failpoints=Failpoints(), threads=1)
    runner.assigned([0])
    runner.submit([(0, "k", [Effect("k", 1, send_by=5_000), Effect("k", 2, send_by=5_001)])])
    answers = drain(runner, 2)
    runner.close()
    assert [a.command for a in answers] == ["late k#1", "answer k#2"]
    assert app.performed == [("k", 2)]
    assert runner.stats.late == 1


def test_restored_keys_get_the_apps_command_in_the_current_epoch(tmp_path: Path) -> None:
    store = PartitionStore(tmp_path / "p0", fresh=True)
    store.put(state_key("run-a"), b"unfinished")
    store.put(state_key("run-b"), b"done")
    store.put("t/0000000000001/run-a", b"")
    store.apply()
    app = App()
    runner = EffectRunner(app, clock=lambda: 0, failpoints=Failpoints(), threads=1)
    runner.assigned([0])
    runner.restored(0, store)
    [answer] = runner.take()
    assert (answer.partition, answer.key, answer.command, answer.epoch) == (
        0,
        "run-a",
        "recover run-a",
        1,
    )
    store.close()
    runner.close()


def test_answers_of_a_rewound_batch_are_put_back_in_front() -> None:
    runner = EffectRunner(App(), clock=lambda: 0, failpoints=Failpoints(), threads=1)
    runner.assigned([0])
    first, second, later = (Answer(0, "k", n, 1) for n in range(3))
    runner.feed(later)
    runner.requeue([first, second])
    assert runner.take() == [first, second, later]
    runner.close()
