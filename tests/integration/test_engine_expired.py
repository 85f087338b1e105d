"""A transaction the broker aborted for outliving its timeout does not stop the processor.

The processor's thread stalls inside a transaction, its first event already produced, for
longer than the transaction timeout (what a SIGSTOP, a frozen VM or a swap storm does to a
whole process). The broker aborts the transaction and bumps the producer's epoch, so when the
thread goes on its producer is fenced. The processor renews its producer and decides the
batch again: nothing of the aborted transaction is visible, every record is admitted exactly
once, and the instance goes on admitting. (A young transaction fenced by a rival with the same
transactional id still stops the processor: ``test_engine.py``.)
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, Producer

from streams.engine.processor import Processor
from streams.settings import Settings
from tests.support.engine_toy import (
    Running,
    ToyApp,
    ToyProcessor,
    ToyState,
    admitted,
    create_toy_topics,
    produce_records,
    record,
)
from tests.support.faults import Faulty, kafka_error
from tests.support.kafka import stability, unique_settings, wait_until

pytestmark = pytest.mark.integration

TIMEOUT_MS = 2000


class StallingApp(ToyApp):
    """Stalls the first time it encodes the state of ``key``: its event is produced then."""

    def __init__(self, settings: Settings, key: str) -> None:
        super().__init__(settings)
        self.key = key
        self.stalled = threading.Event()
        self.go = threading.Event()

    def encode_state(self, state: ToyState) -> bytes:
        if not self.go.is_set() and any(i.startswith(f"id-{self.key}") for i in state.seen):
            self.stalled.set()
            self.go.wait()
        return super().encode_state(state)


def stall_until_the_broker_aborts(settings: Settings, app: StallingApp) -> None:
    """Wait until ``app`` stalls inside its transaction and the broker has aborted it."""
    stable = stability(settings, {settings.topic_named("out")})
    assert app.stalled.wait(60), "the processor never reached the stalled record"
    # The stalled transaction holds records on the output (high watermark past the last
    # stable offset) until the broker aborts it: a timeout plus its check interval later.
    wait_until(lambda: not stable(), timeout_s=30)
    wait_until(stable, timeout_s=60)


@pytest.fixture()
def settings() -> Iterator[Settings]:
    chosen = unique_settings(partitions=1)
    create_toy_topics(chosen, 1)
    yield chosen


def test_a_transaction_the_broker_expired_renews_the_producer(settings: Settings) -> None:
    keys = [f"k{n}" for n in range(10)]
    produce_records(settings, [record(k, f"id-{k}") for k in keys])
    app = StallingApp(settings, "k4")
    processor: ToyProcessor = Processor(
        settings, app, instance_id="a", transaction_timeout_ms=TIMEOUT_MS
    )
    running = Running(processor)
    try:
        stall_until_the_broker_aborts(settings, app)
        assert processor.stats.batches == 0
        app.go.set()
        wait_until(
            lambda: processor.stats.records >= len(keys) or running.error is not None,
            timeout_s=60,
        )
        assert running.error is None

        more = [f"m{n}" for n in range(3)]
        produce_records(settings, [record(k, f"id-{k}") for k in more])
        wait_until(lambda: processor.stats.records >= len(keys) + len(more), timeout_s=60)
        assert running.error is None
        assert processor.stats.producers_renewed == 1
        assert admitted(settings) == {f"id-{k}": 1 for k in keys + more}
    finally:
        app.go.set()
        running.stop()
    assert running.error is None


def test_a_renewal_the_broker_does_not_answer_starts_over(settings: Settings) -> None:
    """The broker aborted the stalled transaction, and the new producer's
    ``init_transactions`` then times out (the broker went away meanwhile): the processor
    starts over in place, retrying until the broker answers, instead of stopping."""
    keys = [f"k{n}" for n in range(10)]
    produce_records(settings, [record(k, f"id-{k}") for k in keys])
    app = StallingApp(settings, "k4")
    processor: ToyProcessor = Processor(
        settings, app, instance_id="a", transaction_timeout_ms=TIMEOUT_MS
    )
    renewals: list[Faulty] = []
    new_producer = processor._clients.new_producer

    def unanswered_once() -> Producer:
        producer = Faulty(new_producer())
        if not renewals:
            producer.plan(
                "init_transactions", kafka_error(KafkaError._TIMED_OUT, "timed out", retriable=True)
            )
        renewals.append(producer)
        return producer  # type: ignore[return-value]

    processor._clients.new_producer = unanswered_once  # type: ignore[method-assign]
    running = Running(processor)
    try:
        stall_until_the_broker_aborts(settings, app)
        app.go.set()
        wait_until(
            lambda: processor.stats.records >= len(keys) or running.error is not None,
            timeout_s=60,
        )
        assert running.error is None, f"the processor stopped: {running.error!r}"
        assert renewals[0].injected, "the renewal's init_transactions was never called"
        assert processor.stats.restarts == 1
        assert admitted(settings) == {f"id-{k}": 1 for k in keys}
    finally:
        app.go.set()
        running.stop()
    assert running.error is None
