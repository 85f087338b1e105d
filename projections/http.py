"""The read side over HTTP: ``GET /v1/runs/{id}``, ``/v1/occurrences/{key}``, ``/v1/stats``,
``/v1/holds``, ``/metrics``.

:func:`create_read_app` is the application ``sluicegate ingest`` serves on its *own* listener
(``SLUICEGATE_READ_HTTP``, loopback by default), never on the webhook's: runs carry payloads,
accounts and prices, which a sender of webhooks has no business reading. With a token it
answers only requests bearing ``Authorization: Bearer <token>`` (401 otherwise, one body for
every reason); every request gets one JSON access-log line (``sluicegate.read.access``).

:func:`add_read_routes` registers the routes and a small PostgreSQL connection pool on an
existing :class:`aiohttp.web.Application` (the pool opens with the app and closes with it).
Queries are the CLI's (:mod:`projections.queries`), run on the read API's own threads, never
the process's default pool (:class:`_Readers`). Errors are JSON:
``{"error": {"code", "message", "problems"}}`` — 404 for an unknown id or route (and for an
id or key no stored text can equal: one holding NUL), 503 when the projection cannot be read.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

import psycopg
from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from psycopg_pool import ConnectionPool, PoolTimeout

from projections import metrics, pages, queries
from projections.db import describe_dsn, schema_name
from projections.errors import ProjectionUnavailable
from projections.queries import journal as journal_queries
from streams.exposition import CONTENT_TYPE
from streams.kafka.headers import KINDS
from streams.settings import Settings

_T = TypeVar("_T")

access_log = logging.getLogger("sluicegate.read.access")

SETTINGS_KEY: web.AppKey[Settings] = web.AppKey("sluicegate_read_settings", Settings)


def error_response(
    status: int, code: str, message: str, problems: list[Any] | None = None
) -> web.Response:
    """The error body every Sluicegate endpoint uses."""
    return web.json_response(
        {"error": {"code": code, "message": message, "problems": problems or []}},
        status=status,
    )


def create_read_app(
    settings: Settings,
    *,
    token: str | None = None,
    ingest_metrics: Callable[[], str] | None = None,
) -> web.Application:
    """The read API alone, optionally behind a Bearer ``token`` (compared in constant time);
    with ``ingest_metrics``, ``GET /metrics/ingest`` answers its text (the webhook's answers,
    counted in the same process: no PostgreSQL involved)."""
    app = web.Application(middlewares=[_read_middleware(token)])
    add_read_routes(app, settings)
    if ingest_metrics is not None:
        page = ingest_metrics

        async def get_ingest_metrics(_request: web.Request) -> web.Response:
            kind = {"Content-Type": CONTENT_TYPE}
            return web.Response(body=page().encode(), headers=kind)

        app.router.add_get("/metrics/ingest", get_ingest_metrics)
    return app


def _read_middleware(token: str | None) -> Middleware:
    expected = token.encode() if token is not None else None

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        started = time.perf_counter()
        response: web.StreamResponse
        if expected is not None and not _bearer_matches(request, expected):
            response = error_response(
                401, "unauthorized", "send Authorization: Bearer <SLUICEGATE_READ_TOKEN>"
            )
            response.headers["WWW-Authenticate"] = 'Bearer realm="sluicegate-read"'
        else:
            try:
                response = await handler(request)
            except web.HTTPException as e:
                if e.status < 400:
                    raise
                code = "not_found" if e.status == 404 else f"http_{e.status}"
                response = error_response(e.status, code, e.reason or "request refused")
        access_log.info(
            "request",
            extra={
                "fields": {
                    "method": request.method,
                    "path": request.path[:512],
                    "status": response.status,
                    "latency_ms": round((time.perf_counter() - started) * 1000, 3),
                }
            },
        )
        return response

    return middleware


def _bearer_matches(request: web.Request, expected: bytes) -> bool:
    scheme, _, presented = request.headers.get("Authorization", "").partition(" ")
    # surrogateescape: header bytes that are not UTF-8 must compare unequal, not crash.
    given = presented.strip().encode("utf-8", "surrogateescape")
    return scheme.lower() == "bearer" and hmac.compare_digest(given, expected)


def add_read_routes(app: web.Application, settings: Settings) -> None:
    """Register the read endpoints on ``app``, reading the projection of ``settings``."""
    app[SETTINGS_KEY] = settings
    app.cleanup_ctx.append(_readers_context)
    app.router.add_get("/v1/runs/{run_id}", _get_run)
    # `.+` so that an admission key with a "/" matches whether or not it was %2F-encoded.
    app.router.add_get("/v1/occurrences/{key:.+}", _get_occurrence)
    app.router.add_get("/v1/scopes/{key:.+}", _get_scope)
    app.router.add_get("/v1/stats", _get_stats)
    app.router.add_get("/v1/holds", _get_holds)
    app.router.add_get("/v1/dead-letters", _get_dead_letters)
    app.router.add_get("/metrics", _get_metrics)


READ_CONNECTIONS = 4
"""Reads served at once: the pool's connections, and as many threads of the read API's own."""
READ_SLOT_WAIT_S = 5.0
"""How long a read waits for one of those, then 503 ``projection_unavailable``."""


class _Readers:
    """Where reads run: a pool of :data:`READ_CONNECTIONS` connections and a thread pool of
    as many threads, the read API's own. Reads that wait (behind a lock, on a slow query)
    then hold up other reads only, never the work of the process they share: ``sluicegate
    ingest``'s webhook checks Kafka for ``/readyz`` on the default thread pool, which the
    reads also used, so 40 reads held by a lock kept ``/readyz`` waiting more than 20 s.
    A read waits at most :data:`READ_SLOT_WAIT_S` for its turn, as it waited for a
    connection before."""

    def __init__(self, settings: Settings) -> None:
        self.pool: ConnectionPool = ConnectionPool(
            settings.pg_dsn,
            min_size=1,
            max_size=READ_CONNECTIONS,
            kwargs={"autocommit": True, "connect_timeout": 5},
            configure=partial(queries.limit_reads, settings=settings),
            open=False,
            name="sluicegate-read",
        )
        self._threads = ThreadPoolExecutor(READ_CONNECTIONS, thread_name_prefix="sluicegate-read")
        self._turns = asyncio.Semaphore(READ_CONNECTIONS)

    async def run(self, read: Callable[[], _T]) -> _T:
        """``read()`` on one of the read threads; :class:`_Busy` if none frees up in time."""
        try:
            await asyncio.wait_for(self._turns.acquire(), READ_SLOT_WAIT_S)
        except TimeoutError:
            raise _Busy() from None
        try:
            return await asyncio.get_running_loop().run_in_executor(self._threads, read)
        finally:
            self._turns.release()

    def close(self) -> None:
        # Not waited for: a read stuck on a frozen server must not hold up a shutdown.
        self._threads.shutdown(wait=False, cancel_futures=True)
        self.pool.close()


READERS_KEY: web.AppKey[_Readers] = web.AppKey("sluicegate_readers", _Readers)


async def _readers_context(app: web.Application) -> AsyncIterator[None]:
    readers = _Readers(app[SETTINGS_KEY])
    readers.pool.open(wait=False)
    app[READERS_KEY] = readers
    try:
        yield
    finally:
        await asyncio.to_thread(readers.close)


async def _query(request: web.Request, fn: Callable[[psycopg.Connection[Any], str], _T]) -> _T:
    app = request.app
    settings = app[SETTINGS_KEY]
    schema = schema_name(settings.topic_prefix)
    readers = app[READERS_KEY]

    def run() -> _T:
        with readers.pool.connection(timeout=READ_SLOT_WAIT_S) as conn, queries.reading(settings):
            queries.ensure_readable(conn, schema, settings)
            return fn(conn, schema)

    try:
        return await readers.run(run)
    except _Busy:
        raise _Unavailable(
            f"the read API is serving {READ_CONNECTIONS} reads already and none finished within "
            f"{READ_SLOT_WAIT_S:g} s (slow queries, or a session holding a lock on the "
            "projection's tables); try again shortly"
        ) from None
    except (PoolTimeout, psycopg.OperationalError) as e:
        raise _Unavailable(
            f"PostgreSQL at {describe_dsn(settings.pg_dsn)} is not answering; try again shortly"
        ) from e
    except ProjectionUnavailable as e:
        raise _Unavailable(str(e)) from e
    except psycopg.Error as e:
        # E.g. a schema being migrated or swapped by a rebuild: answer, do not crash.
        raise _Unavailable(
            f"the projection could not be read ({type(e).__name__}); try again shortly"
        ) from e


class _Busy(Exception):
    pass


class _Unavailable(Exception):
    pass


def _unavailable(e: _Unavailable) -> web.Response:
    return error_response(503, "projection_unavailable", str(e))


async def _get_run(request: web.Request) -> web.Response:
    run_id = request.match_info["run_id"]
    try:
        run = await _query(request, lambda c, s: queries.get_run(c, s, run_id))
    except _Unavailable as e:
        return _unavailable(e)
    if run is None:
        return error_response(
            404, "run_not_found", f"no run {run_id!r} in the projection; {queries.PROJECTOR_HINT}"
        )
    return web.json_response(run)


async def _get_occurrence(request: web.Request) -> web.Response:
    """One occurrence with one page of its deliveries: ``?from=`` (0) and ``?limit=``
    (:data:`~projections.pages.DELIVERIES_PAGE`, at most :data:`~projections.pages.PAGE_MAX`)."""
    key = request.match_info["key"]
    page = _page(request)
    if isinstance(page, web.Response):
        return page
    start, limit = page
    try:
        found = await _query(
            request, lambda c, s: queries.get_occurrence(c, s, key, start=start, limit=limit)
        )
    except _Unavailable as e:
        return _unavailable(e)
    if found is None:
        return error_response(
            404,
            "occurrence_not_found",
            f"no occurrence or delivery {key!r} in the projection; {queries.PROJECTOR_HINT}",
        )
    return web.json_response(found)


def _page(
    request: web.Request, listed: str = "deliveries", default: int = pages.DELIVERIES_PAGE
) -> tuple[int, int] | web.Response:
    """``(from, limit)`` of the request's query (``limit`` ``default`` when not given), or
    its 400 ``invalid_query``."""
    start_text = request.query.get("from", "0")
    limit_text = request.query.get("limit", str(default))
    start, limit = pages.parse_from(start_text), pages.parse_limit(limit_text)
    problems = [
        {"field": field, "message": f"{text!r} is not {accepts}"}
        for field, text, value, accepts in (
            ("from", start_text, start, pages.FROM_ACCEPTS),
            ("limit", limit_text, limit, pages.LIMIT_ACCEPTS),
        )
        if value is None
    ]
    if start is None or limit is None:
        return error_response(
            400, "invalid_query", f"the page of {listed} asked for is not one", problems
        )
    return start, limit


async def _get_scope(request: web.Request) -> web.Response:
    key = request.match_info["key"]
    try:
        found = await _query(request, lambda c, s: queries.get_scope(c, s, key))
    except _Unavailable as e:
        return _unavailable(e)
    if found is None:
        return error_response(
            404,
            "scope_not_found",
            f"no decision scope {key!r} in the projection; {queries.PROJECTOR_HINT}",
        )
    return web.json_response(found)


async def _get_stats(request: web.Request) -> web.Response:
    try:
        stats = await _query(request, queries.get_stats)
    except _Unavailable as e:
        return _unavailable(e)
    return web.json_response(stats)


async def _get_holds(request: web.Request) -> web.Response:
    """Open holds; ``?all=true`` every hold with its resolution; a page at a time (``from``,
    ``limit``)."""
    resolved = request.query.get("all", "").lower() in ("1", "true", "yes")
    page = _page(request, "holds", pages.HOLDS_PAGE)
    if isinstance(page, web.Response):
        return page
    start, limit = page
    try:
        found = await _query(
            request,
            lambda c, s: journal_queries.list_holds(
                c, s, resolved=resolved, start=start, limit=limit
            ),
        )
    except _Unavailable as e:
        return _unavailable(e)
    return web.json_response(found)


async def _get_dead_letters(request: web.Request) -> web.Response:
    """What the stream apps could not decide, a page at a time (``from``, ``limit``), of
    one ``kind`` if asked."""
    page = _page(request, "dead letters")
    if isinstance(page, web.Response):
        return page
    start, limit = page
    kind = request.query.get("kind")
    if kind is not None and kind not in KINDS:
        return error_response(
            400,
            "invalid_query",
            "no such kind of dead letter",
            [{"field": "kind", "message": f"{kind!r} is not one of {', '.join(KINDS)}"}],
        )
    try:
        found = await _query(
            request,
            lambda c, s: queries.list_dead_letters(c, s, start=start, limit=limit, kind=kind),
        )
    except _Unavailable as e:
        return _unavailable(e)
    return web.json_response(found)


async def _get_metrics(request: web.Request) -> web.Response:
    def collect(conn: psycopg.Connection[Any], schema: str) -> str:
        return metrics.render(
            queries.get_stats(conn, schema),
            queries.get_offsets(conn, schema),
            parked=queries.get_parked_count(conn, schema),
            gap_offsets=queries.get_gap_offsets(conn, schema),
            dead_letters=queries.get_dead_letter_counts(conn, schema),
            table_bytes=queries.get_table_bytes(conn, schema),
        )

    try:
        text = await _query(request, collect)
    except _Unavailable as e:
        return _unavailable(e)
    return web.Response(body=text.encode("utf-8"), headers={"Content-Type": CONTENT_TYPE})
