"""Producing ``AdmitDelivery`` commands to the ``deliveries`` topic, keyed by admission key.

The front doors turn a payload into the command with the pure intake step
(:func:`streams.core.intake.intake`), so the admission key, and therefore the partition
that decides the occurrence, is computed one way; this module gives them its id
(:func:`new_delivery_id`) and produces it.

Guarantee of :class:`DeliveryProducer`: a delivery reported as sent was acknowledged by
all in-sync replicas (``acks=all``) through an idempotent producer, so a producer retry never
writes it twice; a redelivery by the *sender* is a new delivery that admission deduplicates.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from schemas.codec import encode
from schemas.commands import AdmitDelivery
from schemas.topics import DELIVERIES
from streams.errors import KafkaUnavailable
from streams.kafka.clients import ErrorCallback, idempotent_producer
from streams.settings import Settings


def new_delivery_id() -> str:
    """A fresh delivery id: one per delivery attempt, never reused."""
    return uuid.uuid4().hex


def delivery_producer(
    settings: Settings, client_id: str, error_cb: ErrorCallback | None = None
) -> Producer:
    """An idempotent producer (acks=all) with a bounded delivery time: every front door's."""
    return idempotent_producer(
        settings,
        client_id=client_id,
        error_cb=error_cb,
        tuning={"linger.ms": 2, "delivery.timeout.ms": 10_000, "message.timeout.ms": 10_000},
    )


class DeliveryProducer:
    """Produces ``AdmitDelivery`` commands to the ``deliveries`` topic, keyed by admission key."""

    def __init__(self, settings: Settings, client_id: str = "sluicegate-publish") -> None:
        self.topic = settings.topic(DELIVERIES)
        self._producer = delivery_producer(settings, client_id)
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
