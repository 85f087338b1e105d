"""``transactions._resume``: a commit (or abort) is resumed until its deadline, and time the
process spent stopped or starved does not use that deadline up.

The clock is the test's: ``time`` in the module is replaced by one whose ``monotonic`` only
moves when a call or a back-off says so.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka import KafkaError, KafkaException

from streams.engine import transactions as txn
from streams.errors import TransactionUnresolved

TIMED_OUT = KafkaException(KafkaError(KafkaError._TIMED_OUT, "retry to resume", retriable=True))
FENCED = KafkaException(KafkaError(KafkaError._FENCED, "fenced", fatal=True))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture()
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(txn, "time", fake)
    return fake


class Broker:
    """``call(timeout)``: each attempt takes ``took(timeout, attempt)`` seconds and then
    raises ``answers[attempt]`` (``None``: succeeds); the timeouts given are kept."""

    def __init__(
        self, clock: Clock, took: Callable[[float, int], float], answers: list[Exception | None]
    ) -> None:
        self.clock = clock
        self.took = took
        self.answers = answers
        self.given: list[float] = []

    def __call__(self, timeout: float) -> None:
        attempt = len(self.given)
        self.given.append(timeout)
        self.clock.now += self.took(timeout, attempt)
        answer = self.answers[min(attempt, len(self.answers) - 1)]
        if answer is not None:
            raise answer


def test_a_commit_that_keeps_timing_out_stops_at_its_deadline(clock: Clock) -> None:
    broker = Broker(clock, lambda timeout, _: timeout, [TIMED_OUT])
    with pytest.raises(TransactionUnresolved):
        txn._resume(broker, clock.now + 20, "committing the transaction")
    assert clock.now - 1000.0 < 20 + 2  # the deadline, give or take a back-off


def test_a_pause_inside_the_call_gives_it_time_to_learn_the_outcome(clock: Clock) -> None:
    # Stopped for 30 s in its first call (given the whole 20 s): the deadline has passed when
    # it returns, yet the next call gets time enough to hear the broker's answer.
    broker = Broker(clock, lambda t, n: 30.0 if n == 0 else min(t, 2.0), [TIMED_OUT, None])
    txn._resume(broker, clock.now + 20, "committing the transaction")
    assert len(broker.given) == 2
    assert broker.given[1] >= txn.AFTER_PAUSE_S - 1


def test_after_a_pause_a_fence_is_raised_for_the_caller_to_judge(clock: Clock) -> None:
    broker = Broker(clock, lambda t, n: 30.0 if n == 0 else 0.01, [TIMED_OUT, FENCED])
    with pytest.raises(KafkaException):
        txn._resume(broker, clock.now + 20, "committing the transaction")


def test_a_pause_in_a_back_off_counts_as_a_pause(
    clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    slept: list[float] = []

    def stopped_in_sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.now += seconds + (30.0 if len(slept) == 1 else 0.0)

    monkeypatch.setattr(clock, "sleep", stopped_in_sleep)
    broker = Broker(clock, lambda t, n: min(t, 1.0), [TIMED_OUT, TIMED_OUT, None])
    txn._resume(broker, clock.now + 20, "committing the transaction")
    assert len(broker.given) == 3
    assert broker.given[1] >= txn.AFTER_PAUSE_S - 1


def test_a_call_that_starts_past_its_deadline_still_gets_a_real_attempt(clock: Clock) -> None:
    broker = Broker(clock, lambda t, n: min(t, 3.0), [TIMED_OUT, None])
    txn._resume(broker, clock.now - 5, "committing the transaction")
    assert broker.given[0] >= txn.AFTER_PAUSE_S - 1


def test_a_broker_that_never_answers_still_stops_after_a_pause(clock: Clock) -> None:
    broker = Broker(clock, lambda t, n: 30.0 if n == 0 else t, [TIMED_OUT])
    with pytest.raises(TransactionUnresolved):
        txn._resume(broker, clock.now + 20, "committing the transaction")
    assert clock.now - 1000.0 < 30 + txn.AFTER_PAUSE_S + 2
