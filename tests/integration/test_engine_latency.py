"""A lone record is decided when it arrives, not when the batch is full or the interval ends.

The processor runs with a commit interval of 30 s: if it waited for a full batch or for the
interval, each record below would wait up to 30 s. It must be decided within 10 s (on an idle
broker it takes milliseconds); nothing here measures speed beyond that bound.
"""

from __future__ import annotations

import pytest

from streams.engine.processor import Processor
from tests.support.engine_toy import (
    Running,
    ToyApp,
    ToyProcessor,
    admitted,
    create_toy_topics,
    produce_records,
)
from tests.support.engine_toy import record as toy_record
from tests.support.kafka import unique_settings, wait_until

pytestmark = pytest.mark.integration

INTERVAL_MS = 30_000


def test_each_lone_record_is_decided_long_before_the_commit_interval() -> None:
    settings = unique_settings(partitions=2)
    create_toy_topics(settings, 2)
    processor: ToyProcessor = Processor(
        settings, ToyApp(settings), instance_id="lone", commit_interval_ms=INTERVAL_MS
    )
    running = Running(processor)
    ids = [f"lone-{n}" for n in range(5)]
    for n, record_id in enumerate(ids):
        produce_records(settings, [toy_record(f"k{n}", record_id)])
        # The first waits for the assignment too.
        wait_until(lambda rid=record_id: rid in admitted(settings), timeout_s=10 if n else 30)
    processor.stop()
    produce_records(settings, [toy_record("wake", "wake")])  # ends the wait for a first record
    running.stop()
    counts = admitted(settings)
    assert all(counts[i] == 1 for i in ids)
    assert running.error is None
