"""The webhook front door as an aiohttp application (``create_app``).

``POST /v1/hooks/{subscription}?env=paper|live[&wait=2s][&token=...]`` turns one request into
one ``AdmitDelivery`` on the ``deliveries`` topic, keyed by its admission key. The request
steps are in :mod:`consumers.ingest.hooks` (with the readers of
:mod:`consumers.ingest.requests`), the access log and the refusal bodies in
:mod:`consumers.ingest.access`.

This application serves only the hooks, ``/healthz`` and ``/readyz``: the read API has its
own listener (:mod:`consumers.ingest.server`).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Mapping

from aiohttp import web

from consumers.ingest.access import access_middleware, install_log_filters
from consumers.ingest.hooks import HOOK_PATH, Directory, Ingest, Outcomes, Sink
from consumers.ingest.outcomes import OutcomeTracker
from consumers.ingest.producer import AsyncDeliveryProducer
from consumers.ingest.request_metrics import RequestMetrics
from consumers.ingest.settings import IngestSettings
from consumers.ingest.workflows import WorkflowDirectory
from schemas.commands import AdmitDelivery
from streams.adapters.workflow_table import WorkflowTable
from streams.clock import wall_clock_ms
from streams.settings import Settings


def create_app(
    settings: Settings,
    *,
    limits: IngestSettings | None = None,
    clock: Callable[[], int] = wall_clock_ms,
    environ: Mapping[str, str] | None = None,
    directory: Directory | None = None,
    sink: Sink | None = None,
    outcomes: Outcomes | None = None,
    after_ack: Callable[[AdmitDelivery], None] | None = None,
    metrics: RequestMetrics | None = None,
) -> web.Application:
    """The ingest application.

    ``clock`` gives ``received_at_ms`` and the time signatures are judged against (epoch ms).
    ``environ`` is where secrets are read (default ``os.environ``, read per request).
    Components not passed in are created on start-up against ``settings``' Kafka and closed
    on clean-up (the producer is flushed first); passed-in ones belong to the caller.
    ``after_ack(delivery)`` runs after the broker acknowledged and before the answer — a
    fault-injection hook for tests; if it raises, the request is answered 500.
    ``metrics`` counts every answer (``request_metrics.py``; served elsewhere).
    The application serves the hooks, ``/healthz`` and ``/readyz``, and nothing else.
    """
    install_log_filters()
    ingest = Ingest(
        settings,
        limits or IngestSettings(),
        clock,
        os.environ if environ is None else environ,
        after_ack,
    )
    ingest.directory, ingest.sink, ingest.outcomes = directory, sink, outcomes
    # Bodies are read as a stream with our own limit; aiohttp's limit is set above it so it
    # never answers first in its own format.
    app = web.Application(
        middlewares=[access_middleware(metrics)],
        client_max_size=ingest.limits.max_body_bytes * 2,
        # Compressed bodies are refused (415) rather than inflated: no sender of webhooks
        # needs them, and inflating is where a small request becomes a large one.
        handler_args={"auto_decompress": False},
    )
    app.router.add_post(HOOK_PATH, ingest.hook)
    app.router.add_get("/healthz", ingest.healthz)
    app.router.add_get("/readyz", ingest.readyz)
    app.cleanup_ctx.append(_components(ingest))
    return app


def _components(ingest: Ingest) -> Callable[[web.Application], AsyncIterator[None]]:
    async def lifecycle(_app: web.Application) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        owned_directory: WorkflowDirectory | None = None
        owned_producer: AsyncDeliveryProducer | None = None
        owned_outcomes: OutcomeTracker | None = None
        if ingest.outcomes is None:
            owned_outcomes = OutcomeTracker(ingest.settings)
            owned_outcomes.start()
            ingest.outcomes = owned_outcomes
        if ingest.sink is None:
            owned_producer = AsyncDeliveryProducer(ingest.settings)
            owned_producer.start(loop)
            ingest.sink = owned_producer
        if ingest.directory is None:
            table = await loop.run_in_executor(None, WorkflowTable, ingest.settings)
            owned_directory = WorkflowDirectory(table)
            owned_directory.start()
            ingest.directory = owned_directory
        try:
            yield
        finally:
            if owned_producer is not None:
                await owned_producer.close()
            if owned_outcomes is not None:
                await loop.run_in_executor(None, owned_outcomes.close)
            if owned_directory is not None:
                await owned_directory.close()

    return lifecycle
