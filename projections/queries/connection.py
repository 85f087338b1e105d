"""Reading the projection: a connection to its schema and the helpers every query uses.

Every query passes user-supplied values as parameters; identifiers go through
:class:`psycopg.sql.Identifier`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, TypeVar

import orjson
import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from projections.db import connect, describe_dsn, schema_exists, schema_name
from projections.errors import NotInProjection, ProjectionUnavailable
from projections.retry import one_line
from streams.settings import Settings
from streams.text import not_text

Json = dict[str, Any]
T = TypeVar("T")


PROJECTOR_HINT = (
    "is `sluicegate projector` running and caught up, or was it pruned "
    "(`sluicegate projections prune`)?"
)


def iso(ms: int | None) -> str | None:
    """Epoch milliseconds as RFC 3339 UTC with milliseconds, ``None`` stays ``None``."""
    if ms is None:
        return None
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@contextmanager
def reader(settings: Settings) -> Iterator[tuple[psycopg.Connection[Any], str]]:
    """An autocommit connection, its statements bounded by the read timeout
    (:func:`limit_reads`), and the schema to read.

    Raises :class:`ProjectionUnavailable` when PostgreSQL is unreachable, the projection
    schema does not exist yet, or a statement of the block outlasts the read timeout or
    loses its connection: the message says what to look for, never a traceback.
    """
    schema = schema_name(settings.topic_prefix)
    conn = connect(settings.pg_dsn, autocommit=True)
    try:
        with reading(settings):
            limit_reads(conn, settings)
            ensure_readable(conn, schema, settings)
            yield conn, schema
    finally:
        conn.close()


@contextmanager
def reading(settings: Settings) -> Iterator[None]:
    """Statements on a connection that is open already: one cancelled by the read timeout
    (:func:`limit_reads`), or one whose connection is lost, becomes
    :class:`ProjectionUnavailable` saying so (the read commands and the HTTP read API)."""
    try:
        yield
    except psycopg.errors.QueryCanceled as e:
        raise ProjectionUnavailable(_read_timed_out(settings)) from e
    except psycopg.OperationalError as e:
        raise ProjectionUnavailable(
            f"lost PostgreSQL at {describe_dsn(settings.pg_dsn)} while reading "
            f"({one_line(e)}); try again shortly"
        ) from e


def limit_reads(conn: psycopg.Connection[Any], settings: Settings) -> None:
    """Cancel any statement of ``conn`` (an autocommit session) that runs longer than
    ``SLUICEGATE_READ_TIMEOUT``, lock waits included: a session holding a projection table
    (a rebuild's swap queued behind a long transaction queues every later reader too) must
    not hold a read for ever."""
    timeout_ms = str(max(1, round(settings.read_timeout_s * 1000)))
    conn.execute("SELECT set_config('statement_timeout', %s, false)", (timeout_ms,))


def _read_timed_out(settings: Settings) -> str:
    return (
        f"the read did not finish within SLUICEGATE_READ_TIMEOUT "
        f"({settings.read_timeout_s:g}s): a session holds a lock on the projection's tables "
        "(a rebuild swapping it in, a migration, a long transaction: see pg_stat_activity "
        "and pg_locks) or the query is slow; try again shortly"
    )


def found(
    settings: Settings,
    what: str,
    ident: str,
    query: Callable[[psycopg.Connection[Any], str, str], T | None],
) -> T:
    """``query(conn, schema, ident)`` on the projection; :class:`NotInProjection` (saying what
    to check) when it finds nothing."""
    with reader(settings) as (conn, schema):
        result = query(conn, schema, ident)
    if result is None:
        raise NotInProjection(what, ident, PROJECTOR_HINT)
    return result


def ensure_readable(conn: psycopg.Connection[Any], schema: str, settings: Settings) -> None:
    """Raise :class:`ProjectionUnavailable` unless ``schema`` holds a projection."""
    if not schema_exists(conn, schema):
        raise ProjectionUnavailable(
            f"there is no projection for topic prefix {settings.topic_prefix!r} (schema "
            f"{schema} in {describe_dsn(settings.pg_dsn)}); start `sluicegate projector` "
            "or run `sluicegate projections rebuild`"
        )


def table(schema: str, name: str) -> sql.Identifier:
    return sql.Identifier(schema, name)


def fetch_all(
    conn: psycopg.Connection[Any], query: sql.SQL | sql.Composed, params: Any = None
) -> list[Json]:
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(query, params)
        return list(cur.fetchall())


def fetch_one(
    conn: psycopg.Connection[Any], query: sql.SQL | sql.Composed, params: Any = None
) -> Json | None:
    rows = fetch_all(conn, query, params)
    return rows[0] if rows else None


def matchable(value: str) -> bool:
    """Whether any stored text can equal ``value``. PostgreSQL text holds neither NUL (the
    projector stores U+FFFD instead) nor the lone surrogates that stand for bytes that were
    not UTF-8, so a key with either matches nothing; asking would only raise."""
    return not_text(value) is None


def payload(text: object) -> object:
    if not isinstance(text, str):
        return text
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text
