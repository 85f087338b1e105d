"""A restore that cannot finish in time starts the processor over instead of stopping it.

Another producer holds a transaction open on the changelog partition the processor takes
over (a previous owner frozen mid-transaction, or a broker that has not aborted it yet): the
restore cannot read past it, and gives up after its bound. The processor then starts over in
place and tries again (1 s, doubling), as it does when the broker is out of reach; once the
transaction is resolved, the restore completes and every record is admitted exactly once.
Meanwhile the instance's probes say so: not ready, starting over (healthy: a restarted
process would wait for the same thing), and ready again once it runs. The partitions restored
before the one held back keep a checkpoint across the start-over. A restore error that
waiting cannot cure (``PartitionCountChanged``) still stops it:
``test_partition_count.py``.
"""

from __future__ import annotations

import http.client
import json
import logging
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from sluicegate.health import HealthServer
from sluicegate.probes import EngineProbes
from streams.engine import processor as processor_module
from streams.engine.processor import Processor
from streams.settings import Settings
from tests.support.engine_toy import (
    Running,
    ToyApp,
    ToyProcessor,
    admitted,
    create_toy_topics,
    produce_records,
    record,
)
from tests.support.kafka import unique_settings, wait_until

pytestmark = pytest.mark.integration


def probe(server: HealthServer, path: str) -> tuple[int, dict[str, object]]:
    conn = http.client.HTTPConnection(*server.address, timeout=5)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


@pytest.fixture()
def settings() -> Iterator[Settings]:
    chosen = unique_settings(partitions=1)
    create_toy_topics(chosen, 1)
    yield chosen


def test_a_restore_held_back_past_its_bound_starts_over(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = [f"k{n}" for n in range(10)]
    produce_records(settings, [record(k, f"id-{k}") for k in keys])
    holder = Producer(
        settings.producer_config(
            **{"transactional.id": f"{settings.topic_prefix}holder"},
            **{"transaction.timeout.ms": 120_000},
        )
    )
    holder.init_transactions(30)
    holder.begin_transaction()
    holder.produce(settings.topic_named("changelog"), key=b"held", value=b"open", partition=0)
    holder.flush(30)
    # The restore gives up after the transaction timeout plus this margin: 2 s + 1 s.
    monkeypatch.setattr(processor_module, "RESTORE_MARGIN_S", 1.0)
    processor: ToyProcessor = Processor(
        settings, ToyApp(settings), instance_id="a", transaction_timeout_ms=2000
    )
    probes = HealthServer(EngineProbes(processor.status), ("127.0.0.1", 0))
    running = Running(processor)
    try:
        wait_until(lambda: processor.stats.restarts >= 2 or running.error is not None, timeout_s=60)
        assert running.error is None, f"the processor stopped: {running.error!r}"
        assert processor.stats.records == 0
        code, ready = probe(probes, "/readyz")
        assert code == 503, ready
        assert ready["phase"] in ("starting_over", "restoring")
        assert isinstance(ready["failed_in_a_row"], int) and ready["failed_in_a_row"] >= 2
        assert probe(probes, "/healthz")[0] == 200
        holder.abort_transaction(30)
        wait_until(
            lambda: processor.stats.records >= len(keys) or running.error is not None,
            timeout_s=60,
        )
        assert running.error is None
        assert admitted(settings) == {f"id-{k}": 1 for k in keys}
        code, ready = probe(probes, "/readyz")
        assert code == 200, ready
        assert (ready["phase"], ready["failed_in_a_row"], ready["assigned"]) == ("running", 0, [0])
        assert ready["starts_over"] == processor.stats.restarts
    finally:
        running.stop()
        probes.close()
    assert running.error is None
    assert processor.status.snapshot().phase.value == "stopped"


def test_partitions_restored_before_one_timed_out_are_not_restored_again(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Partition 0 restores; partition 1's restore is held back and times out. Each start-over
    used to wipe and restore partition 0 again; it now leaves partition 0 a checkpoint, so
    the next attempts read only what partition 0's changelog gained since (nothing).

    A count out of bounds shows the processor's log: which store was kept or restored in
    full, at each attempt."""
    caplog.set_level(logging.INFO, logger="sluicegate.processor")
    settings = unique_settings(partitions=2)
    create_toy_topics(settings, 2)
    keys = [f"k{n}" for n in range(40)]
    produce_records(settings, [record(k, f"id-{k}") for k in keys])
    first: ToyProcessor = Processor(settings, ToyApp(settings), instance_id="a")
    running = Running(first)
    try:
        wait_until(lambda: first.stats.records >= len(keys), timeout_s=60)
    finally:
        running.stop()
    changelog = settings.topic_named("changelog")
    reader = Consumer(settings.kafka_config(**{"group.id": f"{settings.topic_prefix}count"}))
    low, high = reader.get_watermark_offsets(TopicPartition(changelog, 0), timeout=10)
    reader.close()
    assert high - low > 1  # partition 0's states (and a commit marker per transaction)
    holder = Producer(
        settings.producer_config(
            **{"transactional.id": f"{settings.topic_prefix}holder"},
            **{"transaction.timeout.ms": 120_000},
        )
    )
    holder.init_transactions(30)
    holder.begin_transaction()
    holder.produce(changelog, key=b"held", value=b"open", partition=1)
    holder.flush(30)
    monkeypatch.setattr(processor_module, "RESTORE_MARGIN_S", 1.0)
    # Another instance id: no checkpoint of the first instance's applies, partition 0 is
    # restored in full once.
    second: ToyProcessor = Processor(
        settings, ToyApp(settings), instance_id="b", transaction_timeout_ms=2000
    )
    running = Running(second)
    try:
        wait_until(lambda: second.stats.restarts >= 2 or running.error is not None, timeout_s=60)
        assert running.error is None, f"the processor stopped: {running.error!r}"
        once = second.stats.restored_records
        assert 0 < once <= high - low, (once, high - low, caplog.text)
        holder.abort_transaction(30)
        wait_until(lambda: second.status.snapshot().phase.value == "running", timeout_s=60)
        assert running.error is None
        # Partition 1's changelog: its states, read once the held transaction was aborted.
        total = second.stats.restored_records
        assert once < total <= once + (high - low) * 2, (once, total, caplog.text)
    finally:
        running.stop()
    assert running.error is None
    assert admitted(settings) == {f"id-{k}": 1 for k in keys}
