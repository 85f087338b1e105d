"""A transaction that starts right after a commit is held back milliseconds, not 100 ms.

Right after a commit the coordinator is still writing the commit markers and answers the next
transaction's first ``AddPartitionsToTxn``/``AddOffsetsToTxn`` with ``CONCURRENT_TRANSACTIONS``.
librdkafka retries after ``retry.backoff.ms``, 100 ms by default: under a steady stream of
records a few percent of all transactions (and the signals in them) waited that long. At
1,000 records/s more than half of the transactions met the markers still being written and
waited the whole backoff: the processor's producer retries these after 2 ms
(``streams.kafka.clients.TRANSACTION_RETRY``). librdkafka's own protocol log says how long each
retry waits ("Retrying AddOffsetsToTxnRequest ... in 2ms"), so this reads the wait from the
log instead of timing anything.
"""

from __future__ import annotations

import dataclasses
import re
import threading

import pytest
from confluent_kafka import Producer

from streams.engine.processor import Processor
from tests.support.engine_toy import (
    Running,
    ToyApp,
    ToyProcessor,
    admitted,
    create_toy_topics,
)
from tests.support.engine_toy import record as toy_record
from tests.support.kafka import unique_settings, wait_until

pytestmark = pytest.mark.integration

RETRY = re.compile(
    r"Retrying (AddOffsetsToTxn|AddPartitionsToTxn)Request \(.*retry (\d+)/\d+.*\) in (\d+)ms"
)
RECORDS = 600
FIRST_RETRY_MS = 3
"""The longest first retry allowed (librdkafka jitters the 2 ms backoff)."""


def test_a_transaction_right_after_a_commit_is_retried_in_milliseconds(
    capfd: pytest.CaptureFixture[str],
) -> None:
    settings = unique_settings(partitions=2, SLUICEGATE_RDKAFKA_DEBUG="protocol")
    quiet = dataclasses.replace(settings, kafka_extra={})  # the test's own clients log nothing
    create_toy_topics(quiet, 2)
    processor: ToyProcessor = Processor(settings, ToyApp(settings), instance_id="retry")
    running = Running(processor)
    ids = [f"r-{n}" for n in range(RECORDS)]
    stop = threading.Event()

    def trickle() -> None:
        # One record at a time, so that nearly every transaction begins as soon as the
        # previous one committed: the moment the coordinator answers CONCURRENT_TRANSACTIONS.
        producer = Producer(quiet.producer_config(**{"enable.idempotence": True}))
        for n, record_id in enumerate(ids):
            if stop.wait(0.002):
                break
            key, value = toy_record(f"k{n % 7}", record_id)
            producer.produce(quiet.topic_named("in"), key=key.encode(), value=value)
            producer.poll(0)
        producer.flush(30)

    sender = threading.Thread(target=trickle)
    sender.start()
    try:
        sender.join()
        wait_until(lambda: set(ids) <= admitted(quiet).keys(), timeout_s=60)
    finally:
        stop.set()
        sender.join()
        running.stop()
    log = capfd.readouterr().err
    # (request, which retry of it, how long it waited); a retry that fails again backs off
    # twice as long, so only each request's first retry is held to the short wait.
    waits = [(m.group(1), int(m.group(2)), int(m.group(3))) for m in RETRY.finditer(log)]
    assert running.error is None
    counts = admitted(quiet)
    assert all(counts[i] == 1 for i in ids)
    # The broker answered CONCURRENT_TRANSACTIONS at least once (it does for a few percent
    # of back-to-back transactions); otherwise this test would prove nothing.
    assert waits, "no transaction was retried: the race this test is about did not happen"
    assert max(ms for _, attempt, ms in waits if attempt == 1) <= FIRST_RETRY_MS, waits
