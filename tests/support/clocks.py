"""A clock the test moves by hand, for code that takes a ``clock() -> seconds`` callable."""

from __future__ import annotations


class ManualClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
