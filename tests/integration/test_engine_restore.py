"""Restore waits for stability: state and offsets always describe the same batch.

The previous owner of a partition leaves a transaction open that holds, on the changelog, the
admission state for one delivery plus its outputs, and the group offset past that delivery.
A new processor instance starts; the transaction then commits. A copy of the delivery must be
answered as a duplicate: the new instance's state must include what its offsets skip.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from schemas.codec import encode
from schemas.events import DeliveryDeduplicated, RunAdmitted
from streams.adapters.deliveries import new_delivery_id
from streams.adapters.workflow_table import WorkflowTable
from streams.apps.admission import AdmissionApp
from streams.core import admission
from streams.core.admission import Admit
from streams.core.state_codec import encode_state
from streams.engine.processor import Processor
from streams.engine.status import Phase
from streams.engine.store import state_key, timer_key
from tests.support.admission import AdmissionHarness, candle, delivery_for
from tests.support.engine_toy import Running
from tests.support.kafka import read_topic, wait_until

pytestmark = pytest.mark.integration


def admission_processor(
    harness: AdmissionHarness, instance_id: str = "p1"
) -> Processor[Any, Any, Any]:
    """An admission processor as the harness starts it, not yet running."""
    return Processor(
        harness.settings,
        AdmissionApp(harness.settings, WorkflowTable(harness.settings)),
        instance_id=instance_id,
        clock=harness.clock,
        batch_size=200,
    )


def group_has_a_member(harness: AdmissionHarness, group: str) -> bool:
    admin = AdminClient(harness.settings.kafka_config())
    (future,) = admin.describe_consumer_groups([group], request_timeout=10).values()
    description = future.result()
    return bool(description.members) and description.state in (
        ConsumerGroupState.STABLE,
        ConsumerGroupState.COMPLETING_REBALANCING,
    )


def test_a_copy_after_the_previous_owners_last_transaction_is_a_duplicate(
    harness: AdmissionHarness,
) -> None:
    settings = harness.settings
    workflow = harness.table.lookup("btc-breakout", "paper")
    assert workflow is not None
    delivery = delivery_for(
        workflow,
        candle(),
        delivery_id=new_delivery_id(),
        received_at_ms=harness.clock(),
        channel="publish",
    )
    harness.send(delivery)
    (consumed,) = read_topic(settings, settings.topic_named("deliveries"))
    partition, offset = consumed.partition(), consumed.offset()
    assert partition is not None and offset is not None

    # What the previous owner decided for it, with the real core and codec.
    app = AdmissionApp(settings, harness.table)
    events = admission.decide(None, Admit(delivery, workflow), harness.clock())
    state = None
    for event in events:
        state = admission.evolve(state, event)
    assert state is not None and any(isinstance(e, RunAdmitted) for e in events)

    previous_owner = Producer(
        settings.producer_config(
            **{
                "transactional.id": f"{settings.topic_prefix}previous-owner-{uuid.uuid4().hex}",
                "transaction.timeout.ms": 60_000,
            }
        )
    )
    previous_owner.init_transactions(30)
    previous_owner.begin_transaction()
    for event in events:
        route = app.route(event)
        assert route is not None
        previous_owner.produce(route.topic, key=route.key.encode(), value=encode(event))
    changelog = settings.topic_named("admission-changelog")
    key = delivery.admission_key
    previous_owner.produce(
        changelog, key=state_key(key).encode(), value=encode_state(state), partition=partition
    )
    due = admission.next_due_ms(state)
    if due is not None:
        previous_owner.produce(
            changelog, key=timer_key(due, key).encode(), value=b"", partition=partition
        )
    group = f"{settings.topic_prefix}admission"
    member = Consumer(settings.kafka_config(**{"group.id": group}))
    previous_owner.send_offsets_to_transaction(
        [TopicPartition(settings.topic_named("deliveries"), partition, offset + 1)],
        member.consumer_group_metadata(),
        30,
    )
    member.close()
    assert previous_owner.flush(30) == 0

    # A new instance is assigned the partitions while that transaction is still open ...
    running = Running(admission_processor(harness))
    wait_until(lambda: group_has_a_member(harness, group), timeout_s=60)
    # ... and has begun restoring, which cannot end while that transaction is open (the
    # changelog is read committed); only then does the transaction commit.
    wait_until(lambda: running.processor.status.snapshot().phase is Phase.RESTORING, 60)
    time.sleep(0.5)
    assert running.processor.status.snapshot().phase is Phase.RESTORING
    previous_owner.commit_transaction(30)

    copy = harness.deliver(candle())
    out = harness.wait_for(lambda o: o.outcome_for(copy.delivery_id), timeout_s=90)
    running.stop()
    assert running.error is None, running.error
    outcome = out.outcome_for(copy.delivery_id)
    admitted = [r for r in out.of(RunAdmitted) if r.admission_key == key]
    print(f"\ncopy outcome: {[type(o).__name__ for o in outcome]}, RunAdmitted: {len(admitted)}")
    assert [type(o) for o in outcome] == [DeliveryDeduplicated]
    assert len(admitted) == 1
    assert len(out.outcome_for(delivery.delivery_id)) == 1
