"""Effects: the one way a stream app acts on the world, performed only after its commit.

An app that implements :class:`EffectfulApp` (the execution gateway does; admission does not)
gets three more calls from the engine:

* ``effects_of(events)`` — pure: the effect requests that committed ``events`` ask for;
* ``perform(effect)`` — the shell: carry one out (a venue request) and return its answer as a
  command for the same key, or ``None``. It may block; it must not raise for anything the
  outside world does (an exception is logged and the answer counts as lost);
* ``expired(effect, now_ms)`` — the answer for an effect that is too late to perform (a send
  past its ``send_by_ms``: "not sent"), or ``None`` while it is still fresh;
* ``on_assigned(generation)`` and ``on_restored(key, state, now_ms)`` — after a rebalance:
  the new ownership generation, and a command for a restored key that needs one (a
  recovery), decided like an answer.

**Commit order for effects** (the processor's order, steps 6 to 9):

6. the transaction holding the events commits;
7. only then are ``effects_of`` those events handed to a small thread pool, in order per key
   (one slow venue call never stalls another key; two effects of one key never overlap or
   reorder). Records read back on restore never produce an effect: they were not decided;
8. before performing one, the worker checks that this instance still holds the key's
   partition in the same assignment (the partition's *epoch*) and that the effect is still
   fresh (``expired`` is ``None``); a revoked one is dropped, a late one is answered by
   ``expired``. Then ``perform``;
9. the answer is queued locally and decided at the start of a later batch, in a transaction
   of its own, like an input without an offset. An answer whose partition was revoked (or
   revoked and assigned again) in the meantime is dropped: the partition's new owner restores
   the journal and reconciles from it.

So a crash anywhere from 6 on leaves the committed record without its answer, which is what
the app's core reconciles (timers, and ``on_restored``); an effect is never performed for a
transaction that did not commit, and never twice by one instance.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol, TypeGuard, TypeVar

from streams.engine.batch import Answer
from streams.engine.failpoints import Failpoints
from streams.engine.store import STATE_PREFIX, PartitionStore

log = logging.getLogger("sluicegate.effects")

S = TypeVar("S")
C_co = TypeVar("C_co", covariant=True)
E_contra = TypeVar("E_contra", contravariant=True)
F = TypeVar("F")


class EffectfulApp(Protocol[S, C_co, E_contra, F]):
    """The effect calls of a stream app (see the module docstring for the contract)."""

    effect_threads: int

    def effects_of(self, events: Sequence[E_contra]) -> Sequence[F]: ...

    def perform(self, effect: F) -> C_co | None: ...

    def expired(self, effect: F, now_ms: int) -> C_co | None: ...

    def on_assigned(self, generation: int) -> None: ...

    def on_restored(self, key: str, state: S, now_ms: int) -> C_co | None: ...

    def decode_state(self, data: bytes) -> S: ...


_CALLS = ("effects_of", "perform", "expired", "on_assigned", "on_restored")


def is_effectful(app: object) -> TypeGuard[EffectfulApp[Any, Any, Any, Any]]:
    """Whether ``app`` implements :class:`EffectfulApp` (its calls and ``effect_threads``)."""
    calls = all(callable(getattr(app, name, None)) for name in _CALLS)
    return calls and isinstance(getattr(app, "effect_threads", None), int)


@dataclass
class EffectStats:
    """Counts since start: submitted, performed, answered late, dropped (revoked)."""

    submitted: int = 0
    performed: int = 0
    late: int = 0
    dropped: int = 0
    failed: int = 0
    restored_commands: int = 0


class EffectRunner:
    """Performs committed effects off the processing thread and queues their answers."""

    def __init__(
        self,
        app: EffectfulApp[Any, Any, Any, Any],
        clock: Callable[[], int],
        failpoints: Failpoints,
        threads: int = 8,
    ) -> None:
        self.app = app
        self.clock = clock
        self.failpoints = failpoints
        self.stats = EffectStats()
        self.generation = 0
        self._epochs: dict[int, int] = {}
        self._answers: deque[Answer] = deque()
        self._lanes: dict[str, deque[Callable[[], None]]] = {}
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max(1, threads), thread_name_prefix="effects")

    # -- ownership (called from the rebalance callbacks, on the processing thread) --------

    def assigned(self, partitions: Iterable[int]) -> None:
        """A new assignment: every partition in it gets this assignment's epoch."""
        self.generation += 1
        for partition in partitions:
            self._epochs[partition] = self.generation
        self.app.on_assigned(self.generation)

    def revoked(self, partitions: Iterable[int]) -> None:
        for partition in partitions:
            self._epochs.pop(partition, None)

    def restored(self, partition: int, store: PartitionStore) -> None:
        """Queue ``on_restored``'s command for every key of a freshly restored partition."""
        epoch = self._epochs.get(partition)
        if epoch is None:
            return
        now = self.clock()
        for store_key, data in store.items(STATE_PREFIX):
            key = store_key[len(STATE_PREFIX) :]
            command = self.app.on_restored(key, self.app.decode_state(data), now)
            if command is not None:
                self._answers.append(Answer(partition, key, command, epoch))
                self.stats.restored_commands += 1

    # -- after a commit ------------------------------------------------------------------

    def submit(self, produced: Sequence[tuple[int, str, Sequence[object]]]) -> None:
        """Hand the effects of a committed transaction's events to the pool, per key."""
        for partition, key, events in produced:
            effects = self.app.effects_of(events)
            if not effects:
                continue
            epoch = self._epochs.get(partition)
            if epoch is None:
                continue
            for effect in effects:
                self.stats.submitted += 1
                self._lane(key, _Job(self, partition, epoch, key, effect))

    def _lane(self, key: str, job: Callable[[], None]) -> None:
        with self._lock:
            waiting = self._lanes.get(key)
            if waiting is not None:
                waiting.append(job)
                return
            self._lanes[key] = deque()
        self._pool.submit(self._drain, key, job)

    def _drain(self, key: str, job: Callable[[], None]) -> None:
        while True:
            try:
                job()
            except Exception:
                self.stats.failed += 1
                log.exception("effect for %s failed; its answer counts as lost", key)
            with self._lock:
                waiting = self._lanes[key]
                if not waiting:
                    del self._lanes[key]
                    return
                job = waiting.popleft()

    def owns(self, partition: int, epoch: int) -> bool:
        return self._epochs.get(partition) == epoch

    def feed(self, answer: Answer) -> None:
        self._answers.append(answer)

    # -- at the start of a batch (processing thread) --------------------------------------

    def pending(self) -> bool:
        return bool(self._answers)

    def take(self) -> list[Answer]:
        """The queued answers whose partition is still held in the same assignment."""
        taken: list[Answer] = []
        while self._answers:
            answer = self._answers.popleft()
            if self.owns(answer.partition, answer.epoch):
                taken.append(answer)
            else:
                self.stats.dropped += 1
        return taken

    def requeue(self, answers: Sequence[Answer]) -> None:
        """Put answers of a batch that was rewound back in front of the queue."""
        self._answers.extendleft(reversed(answers))

    def close(self) -> None:
        """Cancel effects not started; wait for the running ones (their answers are lost)."""
        self._pool.shutdown(wait=True, cancel_futures=True)


@dataclass(frozen=True)
class _Job:
    """One effect: ownership and freshness checks, the failpoints, ``perform``, feedback."""

    runner: EffectRunner
    partition: int
    epoch: int
    key: str
    effect: object

    def __call__(self) -> None:
        runner = self.runner
        if not runner.owns(self.partition, self.epoch):
            runner.stats.dropped += 1
            return
        late = runner.app.expired(self.effect, runner.clock())
        if late is not None:
            runner.stats.late += 1
            runner.feed(Answer(self.partition, self.key, late, self.epoch))
            return
        runner.failpoints.check("before_effect", (self.effect,))
        answer = runner.app.perform(self.effect)
        runner.stats.performed += 1
        runner.failpoints.check("after_effect", (self.effect,))
        if answer is not None:
            runner.feed(Answer(self.partition, self.key, answer, self.epoch))
