"""Running the ingest application as a process (``sluicegate ingest``).

:func:`run_ingest` serves two listeners until SIGTERM or SIGINT:

- the webhook on ``SLUICEGATE_HTTP`` (hooks, ``/healthz``, ``/readyz``; nothing else);
- the read application it is given (the composition root, ``sluicegate.bootstrap``, mounts
  the read API: runs, occurrences, stats, metrics) on ``SLUICEGATE_READ_HTTP``,
  127.0.0.1:8081 by default; ``off`` switches it off.

Either address being unusable (in use, not local) stops the process at start with a message
naming the variable. Shutdown: the listening sockets close first, requests in flight get up
to ``shutdown_timeout_s`` to finish (each is bounded by the ack budget, or its ``?wait=``),
then the producer is flushed so that every acknowledged answer is backed by a written
delivery, and the consumers are closed.

aiohttp's own access log is switched off: its format includes the query string, which may
carry a ``?token=``. The JSON access logs of :mod:`consumers.ingest.app` and
:mod:`projections.http` replace it.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import signal

from aiohttp import web

from consumers.ingest.app import create_app
from consumers.ingest.errors import IngestSettingsError
from consumers.ingest.listener import CappedSite, fit_descriptors
from consumers.ingest.request_metrics import RequestMetrics
from consumers.ingest.settings import IngestSettings
from streams.heartbeat import Heartbeat
from streams.settings import Settings

log = logging.getLogger("sluicegate.ingest")


async def serve(
    settings: Settings,
    limits: IngestSettings,
    stop: asyncio.Event,
    *,
    read_app: web.Application | None = None,
    shutdown_timeout_s: float = 15.0,
    metrics: RequestMetrics | None = None,
) -> None:
    """Serve until ``stop`` is set, then shut down gracefully (see the module docstring)."""
    runners: list[web.AppRunner] = []
    try:
        listeners = 1 if limits.read_http is None or read_app is None else 2
        limit = fit_descriptors(limits.max_connections, listeners)
        app = create_app(settings, limits=limits, metrics=metrics)
        runner = web.AppRunner(
            app,
            access_log=None,
            shutdown_timeout=shutdown_timeout_s,
            keepalive_timeout=limits.idle_timeout_s,  # also the deadline of a request head
        )
        await runner.setup()
        runners.append(runner)
        # A burst of senders (one connection each) must not overflow the accept queue. No
        # reuse_port: the replay guard is per process, so two processes on one port would let
        # a replayed signature through whichever process had not seen it.
        await _listen(
            runner,
            "SLUICEGATE_HTTP",
            settings.http_host,
            settings.http_port,
            backlog=2048,
            limit=limit,
        )
        if limits.read_http is None:
            log.info("read API switched off (SLUICEGATE_READ_HTTP=off)")
        elif read_app is not None:
            read_runner = web.AppRunner(
                read_app,
                access_log=None,
                shutdown_timeout=shutdown_timeout_s,
                keepalive_timeout=limits.idle_timeout_s,
            )
            await read_runner.setup()
            runners.append(read_runner)
            host, port = limits.read_http
            await _listen(read_runner, "SLUICEGATE_READ_HTTP", host, port, backlog=128, limit=limit)
            if limits.read_token is None and not _is_loopback(host):
                log.warning(
                    "the read API listens beyond this machine without SLUICEGATE_READ_TOKEN: "
                    "anyone who reaches it can read runs, payloads and accounts",
                    extra={"fields": {"read_http": f"{host}:{port}"}},
                )
        await stop.wait()
        log.info("shutting down")
    finally:
        for each in runners:
            await each.cleanup()
        log.info("stopped")


async def _listen(
    runner: web.AppRunner, var: str, host: str, port: int, *, backlog: int, limit: int
) -> None:
    site = CappedSite(runner, host, port, backlog=backlog, limit=limit)
    try:
        await site.start()
    except OSError as e:
        raise IngestSettingsError(
            f"{var}={host}:{port}: cannot listen there ({e.strerror or e}); choose a free local "
            "address" + (" or set it to off" if var == "SLUICEGATE_READ_HTTP" else "")
        ) from None
    fields = {"listener": var, "http": f"http://{host}:{port}", "max_connections": limit}
    log.info("listening", extra={"fields": fields})


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def run_ingest(
    settings: Settings,
    limits: IngestSettings | None = None,
    *,
    read_app: web.Application | None = None,
    heartbeat: Heartbeat | None = None,
    metrics: RequestMetrics | None = None,
) -> None:
    """Run ingest in the foreground until SIGTERM/SIGINT; return after a clean shutdown.

    ``read_app`` is served on ``limits.read_http`` (nothing is, when either is ``None``).
    ``heartbeat`` beats from the event loop while it serves (``streams/heartbeat.py``).
    ``metrics`` counts the webhook's answers (``request_metrics.py``).
    The topics must exist; the log is the caller's to configure (``streams/logs.py``).
    """
    limits = IngestSettings.from_env() if limits is None else limits

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        beating = None if heartbeat is None else asyncio.create_task(heartbeat.beat_async(stop))
        try:
            await serve(settings, limits, stop, read_app=read_app, metrics=metrics)
        finally:
            stop.set()
            if beating is not None:
                await beating

    asyncio.run(main())
