"""Running the ingest application as a process (``sluicegate ingest``).

:func:`run_ingest` makes sure the topics exist, serves on ``SLUICEGATE_HTTP`` and returns after
SIGTERM or SIGINT once shutdown is complete: the listening socket closes first, requests in
flight get up to ``shutdown_timeout_s`` to finish (each is bounded by the ack budget, or its
``?wait=``), then the producer is flushed so that every acknowledged answer is backed by a
written delivery, and the consumers are closed.

aiohttp's own access log is switched off: its format includes the query string, which may
carry a ``?token=``. The JSON access log of :mod:`consumers.ingest.app` replaces it.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from datetime import UTC, datetime

import orjson
from aiohttp import web

from consumers.ingest.app import create_app
from consumers.ingest.settings import IngestSettings
from sluicegate.config import Settings
from sluicegate.topics import ensure_topics

log = logging.getLogger("sluicegate.ingest")


class JsonLineFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and any ``extra={"fields"}``."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            line.update(fields)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(line, default=str).decode("utf-8")


def configure_logging(level: int = logging.INFO) -> None:
    """JSON lines on stderr for every logger, unless the process configured logging already."""
    root = logging.getLogger()
    if root.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLineFormatter())
    root.addHandler(handler)
    root.setLevel(level)


async def serve(
    settings: Settings,
    limits: IngestSettings,
    stop: asyncio.Event,
    *,
    shutdown_timeout_s: float = 15.0,
) -> None:
    """Serve until ``stop`` is set, then shut down gracefully (see the module docstring)."""
    app = create_app(settings, limits=limits, read_api=True)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=shutdown_timeout_s)
    await runner.setup()
    # A burst of senders (one connection each) must not overflow the accept queue. No
    # reuse_port: the replay guard is per process, so two processes on one port would let a
    # replayed signature through whichever process had not seen it.
    site = web.TCPSite(
        runner, settings.http_host, settings.http_port, reuse_address=True, backlog=2048
    )
    await site.start()
    log.info(
        "listening",
        extra={"fields": {"http": f"http://{settings.http_host}:{settings.http_port}"}},
    )
    try:
        await stop.wait()
        log.info("shutting down")
    finally:
        await runner.cleanup()
        log.info("stopped")


def run_ingest(settings: Settings, limits: IngestSettings | None = None) -> None:
    """Run ingest in the foreground until SIGTERM/SIGINT; return after a clean shutdown."""
    configure_logging()
    limits = IngestSettings.from_env() if limits is None else limits
    ensure_topics(settings)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        await serve(settings, limits, stop)

    asyncio.run(main())
