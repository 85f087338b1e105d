"""Turning a delivered payload into an ``AdmitDelivery`` command, and producing it.

Both front doors (the webhook and ``sluicegate publish``) build deliveries here, so that the
admission key, and therefore the partition that decides the occurrence, is computed one way.

Guarantee of :class:`DeliveryProducer`: a delivery reported as sent was acknowledged by
all in-sync replicas (``acks=all``) through an idempotent producer, so a producer retry never
writes it twice; a redelivery by the *sender* is a new delivery that admission deduplicates.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from schemas.codec import encode
from schemas.commands import AdmitDelivery
from schemas.events import WorkflowRevised
from sluicegate.config import KafkaConfig, Settings
from streams.core.identity import identify
from streams.errors import KafkaUnavailable

ENVIRONMENTS = ("paper", "live")


def new_delivery_id() -> str:
    """A fresh delivery id: one per delivery attempt, never reused."""
    return uuid.uuid4().hex


def build_delivery(
    workflow: WorkflowRevised,
    payload: Mapping[str, object],
    *,
    delivery_id: str,
    received_at_ms: int,
    channel: str,
) -> AdmitDelivery:
    """The command for one delivery of ``payload`` to ``workflow``'s destination.

    Raises ``streams.core.errors.IdentityError`` (listing the missing and invalid fields) when
    the workflow's identity or source time cannot be read from the payload: the caller
    answers the sender with that list and produces nothing.
    """
    occurrence = identify(workflow, payload)
    return AdmitDelivery(
        delivery_id=delivery_id,
        subscription=workflow.subscription,
        environment=workflow.environment,
        admission_key=occurrence.admission_key,
        source=occurrence.source,
        event_id=occurrence.event_id,
        payload_json=occurrence.payload_json,
        received_at_ms=received_at_ms,
        channel=channel,
    )


def producer_config(settings: Settings, client_id: str) -> KafkaConfig:
    """Idempotent, acks=all, bounded delivery time: what every delivery producer uses."""
    return settings.producer_config(
        **{
            "client.id": client_id,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 2,
            "delivery.timeout.ms": 10_000,
            "message.timeout.ms": 10_000,
        }
    )


class DeliveryProducer:
    """Produces ``AdmitDelivery`` commands to the ``deliveries`` topic, keyed by admission key."""

    def __init__(self, settings: Settings, client_id: str = "sluicegate-publish") -> None:
        self.topic = settings.topic("deliveries")
        self._producer = Producer(producer_config(settings, client_id))
        self.failures: list[tuple[str, str]] = []

    def send(
        self,
        delivery: AdmitDelivery,
        on_done: Callable[[str, KafkaError | None], None] | None = None,
    ) -> None:
        """Queue one delivery; ``on_done(delivery_id, error)`` runs from ``poll``/``flush``."""

        def report(err: KafkaError | None, _msg: Message) -> None:
            if err is not None:
                self.failures.append((delivery.delivery_id, err.str()))
            if on_done is not None:
                on_done(delivery.delivery_id, err)

        value = encode(delivery)
        while True:
            try:
                self._producer.produce(
                    self.topic, key=delivery.admission_key.encode(), value=value, on_delivery=report
                )
                break
            except BufferError:
                self._producer.poll(0.1)
            except KafkaException as e:
                raise KafkaUnavailable(f"cannot produce to {self.topic}: {e}") from e
        self._producer.poll(0)

    def flush(self, timeout_s: float = 30.0) -> None:
        """Wait for every queued delivery; raise :class:`KafkaUnavailable` if any is unsent."""
        remaining = self._producer.flush(timeout_s)
        if remaining:
            raise KafkaUnavailable(f"{remaining} deliveries not acknowledged in {timeout_s:.0f} s")
        if self.failures:
            first_id, first_error = self.failures[0]
            raise KafkaUnavailable(
                f"{len(self.failures)} deliveries failed (first: {first_id}: {first_error})"
            )
