"""The webhook's request handlers: ``POST /v1/hooks/{subscription}``, ``/healthz``, ``/readyz``.

``POST /v1/hooks/{subscription}?env=paper|live[&wait=2s][&token=...]`` turns one request into
one ``AdmitDelivery`` on the ``deliveries`` topic, keyed by its admission key. In order:

1. the request's shape, judged the same way whatever the name (so that no answer tells
   what is configured): ``env`` (default ``paper``) and ``wait`` (422), a declared
   ``Content-Length`` over the limit (413), the media type and encoding (415), which also
   tells the CloudEvents modes apart (:mod:`consumers.ingest.cloudevents`);
2. the body is read, at most the limit (413) within the body timeout (408); a client that
   goes away meanwhile gets no answer (logged as 499);
3. the destination's workflow is looked up (503 if the workflow table cannot be read in
   time) and the sender authenticated: an unknown destination, an unset secret variable
   and bad credentials are all one 401 with one body, whose reason is only in the log;
4. the body is parsed and taken in (:func:`streams.core.intake.intake`, the step every front
   door takes: the top-level ``"token"`` field removed whatever the auth mode, near-miss
   field names mapped, the identity derived; 422, ``problems`` lists every field). A
   CloudEvent is first checked against the spec (422 ``invalid_cloudevent`` naming each
   attribute) and taken only by a destination whose workflow takes CloudEvents;
5. the delivery is produced and the broker's acknowledgement awaited (503 with
   ``Retry-After`` if it does not come within the budget, ``SLUICEGATE_INGEST_ACK_TIMEOUT``,
   which also covers the lookup);
6. 202 ``{"delivery_id", "admission_key"}``; with ``?wait=`` the admission outcome is awaited
   up to that long and the answer is 200 with ``outcome``/``run_id``/``duplicate``/``reason``,
   or 202 with ``"outcome": "pending"``.

A batch (``application/cloudevents-batch+json``) is answered 207 ``{"results": [...]}``: per
event, in order, ``status`` with the single-event answer (202/200) or its ``error`` (a 4xx,
or 503 when Kafka did not acknowledge it). Its good events are produced concurrently, its
refused ones never; steps 1 to 3 concern the request as a whole.

Every refusal is ``{"error": {"code", "message", "problems"}}``; nothing is produced for a
refused request. Any exception that is not a deliberate refusal is a server fault: it is
logged with its traceback and answered 500 ``internal_error`` (input must never reach that
path; ``tests/integration/test_ingest_fuzz.py`` holds the app to it). Requests that aiohttp
cannot parse as HTTP at all get its plain-text 400, logged as one warning line without a
traceback.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Protocol

from aiohttp import web

from consumers.ingest.answers import json_response, refused
from consumers.ingest.auth import (
    SIGNATURE_HEADER,
    Credentials,
    ReplayGuard,
    authenticate,
    policy_for,
)
from consumers.ingest.cloudevents import Item, Received, is_binary, receive
from consumers.ingest.errors import (
    BrokerUnavailable,
    InvalidBody,
    PayloadTooLarge,
    RequestRefused,
    Unauthorized,
    UnsupportedMediaType,
)
from consumers.ingest.outcomes import PENDING, Outcome
from consumers.ingest.parsing import body_kind
from consumers.ingest.requests import environment_of, read_body, wait_of
from consumers.ingest.settings import IngestSettings
from schemas.commands import AdmitDelivery
from schemas.events import WorkflowRevised
from streams.adapters.deliveries import new_delivery_id
from streams.core.errors import Refusal
from streams.core.intake import TOKEN_FIELD, intake
from streams.settings import Settings

HOOK_PATH = "/v1/hooks/{subscription}"

SUBSCRIPTION = web.RequestKey("sluicegate.subscription", str)
DELIVERY_ID = web.RequestKey("sluicegate.delivery_id", str)


class Directory(Protocol):
    """Where workflows are looked up (``WorkflowDirectory`` in production)."""

    @property
    def loaded(self) -> bool: ...

    async def find(
        self, subscription: str, environment: str, timeout_s: float
    ) -> WorkflowRevised | None: ...


class Sink(Protocol):
    """Where deliveries go (``AsyncDeliveryProducer`` in production)."""

    async def send(self, delivery: AdmitDelivery, timeout_s: float) -> None: ...

    def reachable(self, timeout_s: float) -> bool: ...


class Outcomes(Protocol):
    """Where admission outcomes come from (``OutcomeTracker`` in production)."""

    def expect(self, delivery_id: str) -> asyncio.Future[Outcome]: ...

    def forget(self, delivery_id: str) -> None: ...

    async def wait(self, future: asyncio.Future[Outcome], timeout_s: float) -> Outcome | None: ...


class Ingest:
    """The request handlers and the components they use; one per application."""

    def __init__(
        self,
        settings: Settings,
        limits: IngestSettings,
        clock: Callable[[], int],
        environ: Mapping[str, str],
        after_ack: Callable[[AdmitDelivery], None] | None,
    ) -> None:
        self.settings = settings
        self.limits = limits
        self.clock = clock
        self.environ = environ
        self.after_ack = after_ack
        self.guard = ReplayGuard(limits.replay_window_s)
        self.directory: Directory | None = None
        self.sink: Sink | None = None
        self.outcomes: Outcomes | None = None

    async def hook(self, request: web.Request) -> web.Response:
        """``POST /v1/hooks/{subscription}`` (see the module docstring for the steps)."""
        assert self.directory is not None and self.sink is not None
        started = time.monotonic()
        now_ms = self.clock()
        subscription = request.match_info["subscription"]
        request[SUBSCRIPTION] = subscription
        environment = environment_of(request)
        wait_s = wait_of(request, self.limits.max_wait_s)
        limit = self.limits.max_body_bytes
        if request.content_length is not None and request.content_length > limit:
            raise PayloadTooLarge(f"the body is larger than {limit} bytes")
        kind = body_kind(*media_type(request), binary=is_binary(request.headers))
        encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            raise UnsupportedMediaType("send the body uncompressed (no Content-Encoding)")
        read_started = time.monotonic()
        raw = await read_body(request, limit, self.limits.body_timeout_s)
        # The sender's upload time is not ours to spend: only server-side waits count.
        started += time.monotonic() - read_started

        budget = self.limits.ack_timeout_s
        workflow = await self.directory.find(subscription, environment, budget)
        if workflow is None:
            raise Unauthorized(
                f"no workflow is applied for {subscription[:100]!r} in {environment} "
                "(`sluicegate workflows apply`)"
            )
        # Parse before authenticating (a token may be in the body) but disclose body
        # problems only to an authenticated sender.
        received: Received | None = None
        parse_error: RequestRefused | None = None
        try:
            received = receive(raw, kind, request.headers)
        except (InvalidBody, PayloadTooLarge) as e:
            parse_error = e

        claim = authenticate(
            policy_for(workflow, self.environ),
            Credentials(
                signature=request.headers.get(SIGNATURE_HEADER),
                query_tokens=request.query.getall(TOKEN_FIELD, []),
                body_token=received.body_token if received is not None else None,
            ),
            raw,
            now_s=now_ms / 1000,
            window_s=self.limits.replay_window_s,
            guard=self.guard,
            subscription=workflow.subscription,
            environment=workflow.environment,
        )
        deadline = started + budget
        produced = False
        try:
            if parse_error is not None:
                raise parse_error
            assert received is not None
            if received.batch:
                results, produced = await self._batch(
                    received.items, workflow, now_ms, wait_s, deadline
                )
                return json_response({"results": results}, 207)
            delivery = self._take(received.items[0], workflow, now_ms)
            waiter = await self._send(delivery, wait_s, deadline)
            produced = True
        finally:
            if claim is not None and not produced:
                self.guard.release(claim)

        request[DELIVERY_ID] = delivery.delivery_id
        if self.after_ack is not None:
            self.after_ack(delivery)
        status, body = await self._answer(delivery, waiter, wait_s)
        return json_response(body, status)

    def _take(self, item: Item, workflow: WorkflowRevised, now_ms: int) -> AdmitDelivery:
        """The delivery of one item, or the refusal (raised) intake answers it with."""
        if isinstance(item, Refusal):
            raise refused(item)
        taken = intake(
            item,
            workflow,
            delivery_id=new_delivery_id(),
            received_at_ms=now_ms,
            channel="http",
            now_ms=now_ms,
        )
        if isinstance(taken, Refusal):
            raise refused(taken)
        return taken

    async def _send(
        self, delivery: AdmitDelivery, wait_s: float, deadline: float
    ) -> asyncio.Future[Outcome] | None:
        """Produce ``delivery`` (acknowledged on return, else :class:`BrokerUnavailable`);
        with ``?wait=``, the waiter for its outcome, registered before producing."""
        assert self.sink is not None
        waiter = self.outcomes.expect(delivery.delivery_id) if wait_s and self.outcomes else None
        sent = False
        try:
            await self.sink.send(delivery, max(deadline - time.monotonic(), 0.05))
            sent = True
        finally:
            if waiter is not None and not sent and self.outcomes is not None:
                self.outcomes.forget(delivery.delivery_id)
        return waiter

    async def _answer(
        self, delivery: AdmitDelivery, waiter: asyncio.Future[Outcome] | None, wait_s: float
    ) -> tuple[int, dict[str, object]]:
        """202 with the delivery id and admission key, or with ``?wait=`` the outcome (200)."""
        body: dict[str, object] = {
            "delivery_id": delivery.delivery_id,
            "admission_key": delivery.admission_key,
        }
        if waiter is None or self.outcomes is None:
            return 202, body
        try:
            outcome = await self.outcomes.wait(waiter, wait_s)
        finally:
            self.outcomes.forget(delivery.delivery_id)
        if outcome is None:
            body.update({"outcome": PENDING, "run_id": None, "duplicate": None, "reason": None})
            return 202, body
        body.update(outcome.as_json())
        return 200, body

    async def _batch(
        self,
        items: tuple[Item, ...],
        workflow: WorkflowRevised,
        now_ms: int,
        wait_s: float,
        deadline: float,
    ) -> tuple[list[dict[str, object]], bool]:
        """One answer per event, in order (``status`` plus the single-event answer or
        ``error``), and whether any was produced. Good events are produced concurrently;
        a refused one is produced never, whatever the others get."""
        results: list[dict[str, object]] = [{} for _ in items]
        produced = [False]

        def refused(index: int, error: RequestRefused) -> None:
            results[index] = {"status": error.status, **error.body()}

        async def deliver(index: int, delivery: AdmitDelivery) -> None:
            try:
                waiter = await self._send(delivery, wait_s, deadline)
            except BrokerUnavailable as e:
                refused(index, e)
                return
            produced[0] = True
            if self.after_ack is not None:
                self.after_ack(delivery)
            status, body = await self._answer(delivery, waiter, wait_s)
            results[index] = {"status": status, **body}

        pending = []
        for index, item in enumerate(items):
            try:
                pending.append(deliver(index, self._take(item, workflow, now_ms)))
            except RequestRefused as e:
                refused(index, e)
        await asyncio.gather(*pending)
        return results, produced[0]

    async def healthz(self, _request: web.Request) -> web.Response:
        """``GET /healthz``: the process is alive and serving."""
        return json_response({"status": "ok"}, 200)

    async def readyz(self, _request: web.Request) -> web.Response:
        """``GET /readyz``: 200 when Kafka answers and the workflow table is loaded, else 503."""
        workflows = self.directory is not None and self.directory.loaded
        kafka = False
        if self.sink is not None:
            loop = asyncio.get_running_loop()
            kafka = await loop.run_in_executor(None, self.sink.reachable, 1.0)
        ready = workflows and kafka
        return json_response(
            {"ready": ready, "checks": {"kafka": kafka, "workflows": workflows}},
            200 if ready else 503,
        )


def media_type(request: web.Request) -> tuple[str, str | None]:
    """The request's media type and charset, or :class:`UnsupportedMediaType` when its
    ``Content-Type`` cannot be parsed (aiohttp hands the value to the standard library's
    email parser, which raises ``IndexError`` on values such as ``;0*``)."""
    try:
        return request.content_type, request.charset
    except Exception as e:  # any failure to parse the header is the sender's
        raise UnsupportedMediaType(
            "the Content-Type header cannot be parsed; send application/json or text/plain"
        ) from e
