"""Faust's Kafka transport, reading committed records only.

Sluicegate's processor writes ``tasks`` and ``runs`` in Kafka transactions; a batch that was
aborted (a fenced zombie's, a crashed instance's) stays in the log. Faust's at-least-once
consumer reads ``read_uncommitted`` and offers no setting to change it, so a plain Faust agent
would run handlers for tasks of runs that were never admitted. This transport is Faust's own
aiokafka transport with one difference: its consumer reads ``read_committed``.
"""

from __future__ import annotations

from typing import Any

import aiokafka
from faust.transport import drivers
from faust.transport.drivers import aiokafka as faust_aiokafka

SCHEME = "sluicegate"


class ReadCommittedConsumerThread(faust_aiokafka.AIOKafkaConsumerThread):
    def _create_worker_consumer(self, transport: Any) -> aiokafka.AIOKafkaConsumer:
        consumer = super()._create_worker_consumer(transport)
        # aiokafka builds its fetcher from this attribute when the consumer starts.
        consumer._isolation_level = "read_committed"
        return consumer


class ReadCommittedConsumer(faust_aiokafka.Consumer):
    def _new_consumer_thread(self) -> faust_aiokafka.AIOKafkaConsumerThread:
        return ReadCommittedConsumerThread(self, loop=self.loop, beacon=self.beacon)


class Transport(faust_aiokafka.Transport):
    """``sluicegate://host:port``: the aiokafka transport with a read_committed consumer."""

    Consumer = ReadCommittedConsumer


def register() -> None:
    """Make the ``sluicegate://`` broker scheme resolvable (idempotent)."""
    drivers.TRANSPORTS.aliases[SCHEME] = f"{__name__}:Transport"
