"""Which ListOffsets errors a look at a partition waits out (``streams.kafka.offsets``)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from streams.kafka.offsets import transient


@pytest.mark.parametrize(
    "code",
    [
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        # Right after a topic is deleted and created again, a broker whose metadata lags
        # answers with the leader epoch it knows: CI met 75 from list_offsets there.
        KafkaError.UNKNOWN_LEADER_EPOCH,
        KafkaError.FENCED_LEADER_EPOCH,
    ],
)
def test_a_partition_whose_leader_is_settling_is_waited_for(code: int) -> None:
    assert transient(KafkaError(code))


@pytest.mark.parametrize(
    "code", [KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.INVALID_REQUEST]
)
def test_other_errors_are_not(code: int) -> None:
    assert not transient(KafkaError(code))
