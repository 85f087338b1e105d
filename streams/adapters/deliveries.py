"""Turning a delivered payload into an ``AdmitDelivery`` command, and producing it.

Both front doors (the webhook and ``sluicegate publish``) build deliveries here, so that the
admission key, and therefore the partition that decides the occurrence, is computed one way,
and so that both refuse, with the same reasons and before anything is produced, what
admission would reject for the payload alone: :func:`parse_json_object` refuses JSON objects
with a key given twice (parsers disagree on which value counts), :func:`build_delivery` what
:func:`streams.core.identity.identify` and :func:`streams.core.refusals.check_delivery`
refuse.

Guarantee of :class:`DeliveryProducer`: a delivery reported as sent was acknowledged by
all in-sync replicas (``acks=all``) through an idempotent producer, so a producer retry never
writes it twice; a redelivery by the *sender* is a new delivery that admission deduplicates.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping

import orjson
from confluent_kafka import KafkaError, KafkaException, Message, Producer

from schemas.codec import encode
from schemas.commands import AdmitDelivery
from schemas.events import WorkflowRevised
from schemas.topics import DELIVERIES
from streams.core.identity import identify
from streams.core.refusals import check_delivery
from streams.errors import KafkaUnavailable
from streams.kafka.clients import ErrorCallback, idempotent_producer
from streams.settings import Settings

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

    Raises :class:`streams.core.errors.IdentityError` (every missing or invalid field, with
    its role) when the workflow's identity, source time, scope or content cannot be read
    from the payload, and :class:`streams.core.errors.DeliveryRefused` when the payload is
    too large or its source time is later than ``received_at_ms`` plus the workflow's clock
    uncertainty: the caller answers the sender with the problems and produces nothing.
    """
    occurrence = identify(workflow, payload)
    refused = check_delivery(workflow, occurrence, received_at_ms)
    if refused is not None:
        raise refused
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


class DuplicateKey(ValueError):
    """A JSON object gives one key twice; ``path`` names it (``a``, ``a.b``, ``list[1].k``)."""

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(f"{path}: given more than once")


class _Repeated(dict[str, object]):
    """An object that had a key twice; ``key`` is the first repeated one."""

    key = ""


class TooDeep(ValueError):
    """A JSON document nested deeper than the duplicate-key check can follow."""


def parse_json_object(data: bytes | str) -> object:
    """Parse JSON with orjson, refusing objects that repeat a key anywhere in the document.

    Raises ``orjson.JSONDecodeError`` for what orjson refuses (malformed JSON, NaN, lone
    surrogates, ...), :class:`DuplicateKey` naming the first repeated key (after escapes:
    ``"a"`` and ``"\u0061"`` are one key), and :class:`TooDeep` for documents nested more
    than about 900 levels. The value returned is orjson's.
    """
    value = orjson.loads(data)
    repeated = False

    def pairs_hook(pairs: list[tuple[str, object]]) -> dict[str, object]:
        nonlocal repeated
        result = dict(pairs)
        if len(result) == len(pairs):
            return result
        repeated = True
        marked = _Repeated(result)
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                marked.key = key
                break
            seen.add(key)
        return marked

    try:
        checked = json.loads(data, object_pairs_hook=pairs_hook)
    except RecursionError:
        raise TooDeep("the JSON document is nested too deeply") from None
    if repeated:
        raise DuplicateKey(_repeated_path(checked))
    return value


def _repeated_path(document: object) -> str:
    stack: list[tuple[object, str]] = [(document, "")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, _Repeated):
            return f"{path}.{node.key}" if path else node.key
        if isinstance(node, dict):
            stack.extend((v, f"{path}.{k}" if path else k) for k, v in reversed(node.items()))
        elif isinstance(node, list):
            stack.extend((v, f"{path}[{i}]") for i, v in reversed(list(enumerate(node))))
    return "(unknown)"


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
