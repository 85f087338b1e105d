"""The group's committed offsets lost while the instances were down: nothing is decided twice.

Kafka deletes a group's committed offsets once the group has been empty for
``offsets.retention.minutes`` (7 days by default), while the input topics keep their records
for 14: a deployment left stopped over a long holiday comes back without offsets. An
operator's ``kafka-consumer-groups --delete`` (or ``--reset-offsets --to-earliest``) does the
same at once. Without offsets the consumer starts at the oldest record it can read, and
every delivery decided before was decided again: a second outcome for each, counted twice
by the read model. The state restored from the changelog knows where its decisions end,
because each transaction records its input positions there too.
"""

from __future__ import annotations

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

from schemas.events import RunAdmitted
from streams.kafka.clients import admin_client
from streams.settings import Settings
from tests.support.admission import OUTCOMES, AdmissionHarness, candle
from tests.support.kafka import wait_until

pytestmark = pytest.mark.integration


def _group(settings: Settings) -> str:
    return f"{settings.topic_prefix}admission"


def _committed(settings: Settings) -> int:
    """The admission group's committed offsets of ``deliveries``, summed (0 for none)."""
    topic = settings.topic_named("deliveries")
    wanted = [TopicPartition(topic, p) for p in range(settings.partitions)]
    request = [ConsumerGroupTopicPartitions(_group(settings), wanted)]
    admin = admin_client(settings)  # alive until its future has the answer
    answer = admin.list_consumer_group_offsets(request)
    listed = answer[_group(settings)].result(timeout=30).topic_partitions
    return sum(max(tp.offset, 0) for tp in listed)


def _forget_offsets(settings: Settings) -> None:
    """Delete the group, offsets and all, as their expiry does."""
    admin = admin_client(settings)  # alive until its futures have their answers
    for future in admin.delete_consumer_groups([_group(settings)]).values():
        future.result(timeout=30)


@pytest.mark.parametrize(
    "restarted_as",
    [
        pytest.param("p1", id="store-kept"),  # its checkpoint: the store is reopened as it was
        pytest.param("p2", id="store-restored"),  # another host: restored from the changelog
    ],
)
def test_deliveries_decided_before_the_group_lost_its_offsets_are_not_decided_again(
    restarted_as: str,
) -> None:
    harness = AdmissionHarness(partitions=3)
    try:
        harness.apply_workflow(branch_timeout="1h")
        before = [harness.deliver(candle(instrument=f"A{m}USDT")) for m in range(12)]
        harness.start_processor()
        harness.wait_for_outcomes(12)
        wait_until(lambda: _committed(harness.settings) == 12, what="12 offsets committed")
        harness.stop_processors()

        _forget_offsets(harness.settings)
        assert _committed(harness.settings) == 0
        after = [harness.deliver(candle(instrument=f"B{m}USDT")) for m in range(6)]
        processor = harness.start_processor(restarted_as)
        wait_until(lambda: _committed(harness.settings) == 18, what="18 offsets committed")
        # The group's offsets can be read before the markers of the same transaction make
        # its outcomes visible to a read_committed reader: wait for them, do not read once.
        outcomes = harness.wait_for_outcomes(18)
    finally:
        harness.close()

    twice = [d.delivery_id for d in before + after if len(outcomes.outcome_for(d.delivery_id)) != 1]
    assert twice == []
    assert processor.stats.records == 6  # the deliveries sent after the offsets were lost
    assert sum(isinstance(r, OUTCOMES) for r in outcomes.runs) == 18
    assert len(outcomes.of(RunAdmitted)) == 18
