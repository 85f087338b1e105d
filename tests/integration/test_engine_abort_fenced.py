"""An abort refused because another instance took the transactional id over is a fence.

The processor aborts a batch that failed with an abortable error; if the instance was fenced
meanwhile, the abort itself fails with librdkafka's fatal ``_FENCED``. That must stop the
instance as :class:`ProcessorFenced` (what every other fenced call raises), not as a raw
driver exception (seen once: a fenced first instance stopped with ``KafkaException(_FENCED,
"Failed to add partitions to transaction")``).
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from streams.engine import transactions as txn
from streams.errors import ProcessorFenced
from streams.kafka.clients import transactional_producer
from tests.support.kafka import create_topics, unique_settings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def fenced_in_a_transaction() -> tuple[Producer, str]:
    """A producer fenced (another took its transactional id) with a transaction open that
    holds a flushed record; and a second topic, not yet in that transaction."""
    settings = unique_settings(partitions=1)
    first, second = settings.topic_named("out"), settings.topic_named("more")
    create_topics(settings, [(first, 1, False), (second, 1, False)])
    same = f"{settings.topic_prefix}same"
    old = transactional_producer(settings, transactional_id=same, client_id="old")
    old.init_transactions(30)
    old.begin_transaction()
    old.produce(first, key=b"k", value=b"v")
    assert old.flush(30) == 0
    new = transactional_producer(settings, transactional_id=same, client_id="new")
    new.init_transactions(30)  # bumps the epoch: the old producer is fenced
    return old, second


def test_an_abort_after_a_fence_raises_processor_fenced() -> None:
    old, _ = fenced_in_a_transaction()
    with pytest.raises(ProcessorFenced, match="toy/same was fenced while aborting"):
        txn.abort(old, time.monotonic() + 30, "toy/same")


def test_a_fence_met_while_flushing_before_the_abort_raises_processor_fenced() -> None:
    """The fence arrives when the old producer adds a new partition to its transaction: the
    flush that precedes the abort raises librdkafka's fatal error itself (seen when two
    ``sluicegate processor`` processes were started with the same ``--instance-id``: the
    first stopped with a traceback of ``KafkaException(_FENCED)`` from that flush)."""
    old, second = fenced_in_a_transaction()
    old.produce(second, key=b"k", value=b"v")  # its partition is added to the transaction
    with pytest.raises(ProcessorFenced, match="toy/same was fenced while aborting"):
        txn.abort(old, time.monotonic() + 30, "toy/same")
