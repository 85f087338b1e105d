"""Keyed topics never change partition count under running state.

State is kept per partition number: if a keyed topic gained partitions, keys would move to
partitions whose state has never seen them, and their copies would be admitted again. The
reviewer's reproduction: 20 occurrences admitted on 2 partitions, the topics raised to 4,
the same 20 published again. ``topics ensure`` must refuse to raise the count, and a
processor must refuse to run on topics whose count was changed by hand.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewPartitions

from schemas.commands import AdmitDelivery
from schemas.events import DeliveryDeduplicated, RunAdmitted
from streams.adapters.deliveries import DeliveryProducer, new_delivery_id
from streams.adapters.workflow_table import WorkflowTable
from streams.apps.admission import AdmissionApp
from streams.engine.processor import Processor
from streams.kafka.topics import TopicError, ensure_topics
from tests.support.admission import AdmissionHarness, Outcomes, candle, delivery_for
from tests.support.engine_toy import Running
from tests.support.kafka import unique_settings, wait_until

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
KEYED = ("deliveries", "branch-results", "admission-changelog", "runs", "tasks")
OCCURRENCES = 20


@pytest.fixture()
def harness() -> Iterator[AdmissionHarness]:
    h = AdmissionHarness(partitions=2)
    h.apply_workflow()
    yield h
    h.close()


def processor(harness: AdmissionHarness) -> Running:
    return Running(
        Processor(
            harness.settings,
            AdmissionApp(harness.settings, WorkflowTable(harness.settings)),
            instance_id="p1",
            clock=harness.clock,
            batch_size=200,
        )
    )


def bodies() -> list[dict[str, object]]:
    return [candle(event_id=f"evt-{n:03d}") for n in range(OCCURRENCES)]


def publish_fresh(harness: AdmissionHarness) -> list[AdmitDelivery]:
    """Publish the 20 occurrences again from a new producer (as a new publish or ingest
    process would, with fresh topic metadata)."""
    workflow = harness.table.lookup("btc-breakout", "paper")
    assert workflow is not None
    producer = DeliveryProducer(harness.settings, client_id="fresh")
    sent = []
    for body in bodies():
        delivery = delivery_for(
            workflow,
            body,
            delivery_id=new_delivery_id(),
            received_at_ms=harness.clock(),
            channel="publish",
        )
        producer.send(delivery)
        sent.append(delivery)
    producer.flush()
    return sent


def admit_twenty(harness: AdmissionHarness) -> Running:
    running = processor(harness)
    for body in bodies():
        harness.deliver(body)
    out = harness.wait_for_outcomes(OCCURRENCES)
    assert len(out.of(RunAdmitted)) == OCCURRENCES
    return running


def counts(harness: AdmissionHarness) -> dict[str, int]:
    admin = AdminClient(harness.settings.kafka_config())
    topics = admin.list_topics(timeout=10).topics
    return {name: len(topics[harness.settings.topic_named(name)].partitions) for name in KEYED}


def answers(harness: AdmissionHarness, copies: list[AdmitDelivery]) -> int:
    """How many outcomes the copies have so far (the topics read once, not once per copy)."""
    out = harness.outcomes()
    return sum(len(out.outcome_for(c.delivery_id)) for c in copies)


def second_admissions(out: Outcomes, copies: list[AdmitDelivery]) -> int:
    ids = {c.delivery_id for c in copies}
    return sum(1 for r in out.of(RunAdmitted) if r.delivery_id in ids)


def cli(harness: AdmissionHarness, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sluicegate.cli", *args],
        cwd=ROOT,
        env=dict(os.environ, SLUICEGATE_TOPIC_PREFIX=harness.settings.topic_prefix, **env),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_topics_ensure_refuses_to_raise_the_partition_count(harness: AdmissionHarness) -> None:
    running = admit_twenty(harness)
    ensured = cli(harness, "topics", "ensure", SLUICEGATE_PARTITIONS="4")
    running.stop()
    running = processor(harness)  # the routine restart after maintenance
    copies = publish_fresh(harness)
    out = harness.wait_for_outcomes(2 * OCCURRENCES, timeout_s=90)
    running.stop()
    twice = second_admissions(out, copies)
    print(f"\nensure exit {ensured.returncode}: {ensured.stderr.strip()}")
    print(f"partitions after ensure: {counts(harness)}; copies admitted again: {twice}")

    assert ensured.returncode == 1
    assert "SLUICEGATE_TOPIC_PREFIX" in ensured.stderr and "2 partitions" in ensured.stderr
    assert set(counts(harness).values()) == {2}
    assert twice == 0
    assert all(
        isinstance(o, DeliveryDeduplicated) for c in copies for o in out.outcome_for(c.delivery_id)
    )
    assert all(len(out.outcome_for(c.delivery_id)) == 1 for c in copies)
    assert running.error is None


def test_a_processor_refuses_topics_raised_by_hand(harness: AdmissionHarness) -> None:
    running = admit_twenty(harness)
    running.stop()
    admin = AdminClient(harness.settings.kafka_config())
    raised = [NewPartitions(harness.settings.topic_named(name), 4) for name in KEYED]
    for future in admin.create_partitions(raised).values():
        future.result()
    wait_until(lambda: set(counts(harness).values()) == {4})
    copies = publish_fresh(harness)
    running = processor(harness)
    outcome_count = [0]

    def settled() -> bool:
        outcome_count[0] = answers(harness, copies)
        return running.error is not None or outcome_count[0] >= OCCURRENCES

    wait_until(settled, timeout_s=90, interval_s=0.5)
    running.stop()
    twice = second_admissions(harness.outcomes(), copies)
    print(f"\nerror: {running.error!r}; answered {outcome_count[0]}, admitted again: {twice}")
    assert twice == 0
    assert running.error is not None
    assert "4 partitions" in str(running.error) and "2" in str(running.error)


def test_a_running_processor_stops_when_an_input_topic_is_raised(
    harness: AdmissionHarness,
) -> None:
    running = admit_twenty(harness)
    admin = AdminClient(harness.settings.kafka_config())
    topic = harness.settings.topic_named("deliveries")
    for future in admin.create_partitions([NewPartitions(topic, 3)]).values():
        future.result()
    wait_until(lambda: counts(harness)["deliveries"] == 3)
    copies = publish_fresh(harness)
    answered = [0]

    def settled() -> bool:
        answered[0] = answers(harness, copies)
        return running.error is not None or answered[0] >= OCCURRENCES

    # Copies on the new partition are never consumed without a rebalance: wait a while.
    with contextlib.suppress(TimeoutError):
        wait_until(settled, timeout_s=30, interval_s=0.5)
    running.stop()
    twice = second_admissions(harness.outcomes(), copies)
    print(f"\nerror: {running.error!r}; answered {answered[0]}, admitted again: {twice}")
    assert twice == 0
    assert running.error is not None
    assert "partition" in str(running.error)


def test_ensure_creates_missing_topics_with_the_existing_count() -> None:
    settings = unique_settings(partitions=2)
    ensure_topics(settings)
    wider = dataclasses.replace(settings, partitions=4)
    # Components that merely need the topics keep the existing count ...
    assert set(ensure_topics(wider).values()) == {1, 2}
    # ... and the administrative command refuses to change it.
    with pytest.raises(TopicError, match="SLUICEGATE_TOPIC_PREFIX"):
        ensure_topics(wider, require_declared_count=True)
