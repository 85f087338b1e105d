"""Fault injection on the real Kafka clients (never a mock: every call reaches librdkafka).

``Faulty(real)`` delegates everything to ``real``. ``plan(method, *entries)`` queues one-shot
faults: each call of ``method`` takes the next entry; ``None`` calls the real method, an
exception is raised instead of calling it, and a callable is called as
``entry(real_method, *args, **kwargs)``. ``around(method, fn)`` wraps every later call
without a queued entry the same way (to slow a call down, or to observe it).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, KafkaException

Plan = BaseException | Callable[..., Any] | None


class Faulty:
    def __init__(self, real: Any) -> None:
        self._real = real
        self._plans: dict[str, list[Plan]] = {}
        self._around: dict[str, Callable[..., Any]] = {}
        self._lock = threading.Lock()
        self.calls: dict[str, int] = {}
        self.injected: list[tuple[str, str]] = []

    def plan(self, method: str, *entries: Plan) -> None:
        with self._lock:
            self._plans.setdefault(method, []).extend(entries)

    def around(self, method: str, fn: Callable[..., Any]) -> None:
        self._around[method] = fn

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._real, name)
        if name not in self._plans and name not in self._around:
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                self.calls[name] = self.calls.get(name, 0) + 1
                plan = self._plans.get(name, [])
                entry = plan.pop(0) if plan else self._around.get(name)
            if entry is None:
                return attr(*args, **kwargs)
            if isinstance(entry, BaseException):
                self.injected.append((name, str(entry)))
                raise entry
            return entry(attr, *args, **kwargs)

        return call


def kafka_error(code: int, reason: str, **flags: bool) -> KafkaException:
    """A ``KafkaException`` as librdkafka raises it, with its retriable/abort/fatal flags."""
    return KafkaException(KafkaError(code, reason, **flags))
