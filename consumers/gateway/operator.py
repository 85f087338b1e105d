"""Operator commands for the gateway: ``RecoverRun`` and ``ResolveHold`` onto ``actions``.

The command line never acts on a run itself: it asks the run's owner. Each command is
produced to ``actions`` keyed by its run id, so it is decided by whichever gateway instance
holds that run's partition, in order with the run's other inputs; two operators (or two
gateways) racing on one run therefore cannot both advance it. The answer is the journal's
(a ``RecoveryReceiptRecorded``, a ``HoldResolved``), read back from the projection.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from confluent_kafka import KafkaException

from consumers.gateway.errors import GatewayError
from schemas.codec import encode
from schemas.commands import RecoverRun, ResolveHold
from schemas.topics import ACTIONS
from streams.kafka.clients import idempotent_producer
from streams.settings import Settings

RESOLUTIONS = ("retry_lookup", "confirm_absent", "abandon")


def run_of(action_id: str) -> str:
    """The run id of an action id (``<run_id>.<slot>``); :class:`GatewayError` if it is not one."""
    run_id, dot, slot = action_id.rpartition(".")
    if not dot or not run_id.startswith("run-") or not slot:
        raise GatewayError(f"{action_id!r} is not an action id (RUN_ID.SLOT, e.g. run-….entry)")
    return run_id


def send_commands(settings: Settings, commands: Sequence[RecoverRun | ResolveHold]) -> None:
    """Produce ``commands`` to ``actions`` and wait until Kafka has every one of them."""
    errors: list[str] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    producer = idempotent_producer(settings, client_id="sluicegate-operator")
    topic = settings.topic(ACTIONS)
    try:
        for command in commands:
            producer.produce(
                topic,
                key=command.run_id.encode(),
                value=encode(command),
                on_delivery=delivered,
            )
    except KafkaException as e:
        raise GatewayError(f"cannot produce to {topic}: {e}") from e
    if producer.flush(30) or errors:
        raise GatewayError(
            f"Kafka did not acknowledge the request ({'; '.join(errors) or 'timeout'}); "
            "run the command again (a repeated request is harmless)"
        )
