"""Running the paper venue: state, routes, error rendering, signals.

:func:`run_venue` opens (or creates) the state in ``<state-dir>/venue.sqlite3``, seeds it from
the configuration the first time, arms the configured faults that are not stored yet, serves
until SIGTERM/SIGINT and closes the state. A ``kill -9`` at any moment loses nothing that was
committed; answers are only sent after their commit.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiohttp import web

from consumers.paper_venue import binance_api, native_api
from consumers.paper_venue.admin_api import AdminApi, Problem, seed_faults
from consumers.paper_venue.config import (
    ADMIN_TOKEN_ENV,
    ADMIN_TOKEN_FILE,
    load_config,
    resolve_admin_token,
)
from consumers.paper_venue.context import Venue
from consumers.paper_venue.engine import Exchange
from consumers.paper_venue.errors import PaperVenueError, Refusal
from consumers.paper_venue.faults import FaultBook, FaultSpecError, parse_fault
from consumers.paper_venue.malformed_http import quiet_malformed_http
from consumers.paper_venue.money import parse_whole
from consumers.paper_venue.notify_api import NotificationSink
from consumers.paper_venue.store import Store

log = logging.getLogger("sluicegate.venue")
STATE_FILE = "venue.sqlite3"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class JsonLines(logging.Formatter):
    """One JSON object per line: time, level, message and ``extra={"fields": {...}}``."""

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
        return json.dumps(line, default=str)


def open_venue(state_dir: Path, config_path: Path | None) -> Venue:
    """The venue's state and rules, ready to serve (raises :class:`PaperVenueError`)."""
    config = load_config(config_path)
    for index, item in enumerate(config.faults):
        try:
            parse_fault(item, f"config-{index}")
        except FaultSpecError as e:
            raise PaperVenueError(f"[[faults]] {index} in {config_path}: {e}") from None
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise PaperVenueError(f"cannot create --state-dir {state_dir}: {e.strerror}") from None
    store = Store(state_dir / STATE_FILE)
    exchange = Exchange(store, config)
    exchange.seed_if_new()
    venue = Venue(exchange, FaultBook(store), config, resolve_admin_token(config, state_dir))
    seed_faults(venue)
    return venue


def create_app(venue: Venue) -> web.Application:
    """The aiohttp application: Binance routes, native routes, admin routes."""

    @web.middleware
    async def render(request: web.Request, handler: Handler) -> web.StreamResponse:
        is_binance = request.path.startswith("/api/")
        api = "binance" if is_binance else "native"
        started = time.perf_counter()
        outcome = "500"
        try:
            response = await handler(request)
            outcome = str(response.status)
            return response
        except Refusal as refusal:
            outcome = str(refusal.code) if is_binance else refusal.kind.value
            return binance_api.error(refusal) if is_binance else native_api.error(refusal)
        except Problem as problem:
            outcome = problem.code
            return problem.response()
        except web.HTTPException as e:  # no such route or method
            outcome = str(e.status)
            if is_binance:
                return web.json_response(
                    {"code": -1020, "msg": "This operation is not supported."}, status=e.status
                )
            return Problem(
                e.status, "no_route", f"no route {request.method} {request.path}"
            ).response()
        except Exception:
            log.exception("request failed", extra={"fields": {"path": request.path}})
            if is_binance:
                return web.json_response(
                    {
                        "code": -1000,
                        "msg": "An unknown error occurred while processing the request.",
                    },
                    status=500,
                )
            return web.json_response(
                {"error": {"code": "outcome_unknown", "message": "internal error"}}, status=500
            )
        finally:
            venue.count(api, f"{request.method} {request.path}", outcome)
            log.info(
                "request",
                extra={
                    "fields": {
                        "method": request.method,
                        "path": request.path,
                        "outcome": outcome,
                        "latency_ms": round((time.perf_counter() - started) * 1000, 3),
                    }
                },
            )

    quiet_malformed_http()
    app = web.Application(middlewares=[render])
    app.add_routes(binance_api.BinanceApi(venue).routes())
    app.add_routes(native_api.NativeApi(venue).routes())
    app.add_routes(AdminApi(venue).routes())
    sink = NotificationSink(venue, venue.exchange.store.path)
    app.add_routes(sink.routes())
    app.on_cleanup.append(lambda _: _close(sink))
    return app


async def _close(sink: NotificationSink) -> None:
    sink.close()


async def serve(venue: Venue, host: str, port: int, stop: asyncio.Event) -> None:
    """Serve until ``stop`` is set; requests in flight get up to 5 s to finish."""
    runner = web.AppRunner(create_app(venue), access_log=None, shutdown_timeout=5.0)
    await runner.setup()
    site = web.TCPSite(runner, host, port, reuse_address=True)
    try:
        await site.start()
    except OSError as e:
        await runner.cleanup()
        raise PaperVenueError(f"cannot listen on {host}:{port}: {e.strerror}") from None
    log.info(
        "listening",
        extra={
            "fields": {"http": f"http://{host}:{port}", "state": str(venue.exchange.store.path)}
        },
    )
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


def run_venue(
    http: str,
    state_dir: Path,
    config_path: Path | None,
    beside: Callable[[asyncio.Event], Coroutine[Any, Any, None]] | None = None,
) -> None:
    """Run the venue in the foreground until SIGTERM/SIGINT.

    ``beside(stop)`` runs on the venue's event loop while it serves, until ``stop`` is set:
    how the product's ``sluicegate venue`` beats its supervisor's heartbeat from the loop
    (the venue itself imports nothing of the product)."""
    host, _, port_text = http.rpartition(":")
    port = parse_whole(port_text, 65535)
    if not host or not port:
        raise PaperVenueError(f"--http {http!r} is not HOST:PORT (for example 127.0.0.1:8090)")
    if not logging.getLogger().handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(JsonLines())
        logging.getLogger().addHandler(handler)
        logging.getLogger().setLevel(logging.INFO)
    venue = open_venue(state_dir, config_path)
    if not (os.environ.get(ADMIN_TOKEN_ENV) or venue.config.admin_token):
        log.info("admin token", extra={"fields": {"file": str(state_dir / ADMIN_TOKEN_FILE)}})

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        running = None if beside is None else asyncio.create_task(beside(stop))
        try:
            await serve(venue, host, port, stop)
        finally:
            stop.set()
            if running is not None:
                await running

    try:
        asyncio.run(main())
    finally:
        venue.exchange.store.close()
