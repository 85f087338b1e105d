"""Swapping a rebuilt schema in for the live one without making its readers queue.

The swap renames the live schema away, renames the fresh one to the live name and drops the
old one, in one transaction under the writers' lock. Dropping needs an ACCESS EXCLUSIVE lock
on every old table, which waits for any session still holding one of them, an analyst's
transaction left open for instance; and while it waits, PostgreSQL queues every later lock
request on those tables behind it, so each reader of the live projection and the projector
would wait as long as that session stays open.

So each attempt, once it holds the writers' lock, waits at most :data:`LOCK_WAIT_S` for
the tables' locks (``lock_timeout``): a reader queues behind it no longer than that. A
failed attempt changes nothing and is tried again a second later, naming the sessions in
the way every :data:`REPORT_EVERY_S`, until the swap succeeds or ``patience_s`` has passed:
then :class:`SwapBlocked` names the sessions and how to end them, and the live projection
stays as it was.
"""

from __future__ import annotations

import time
from typing import Any, TextIO

import psycopg
from psycopg import sql

from projections.db import OLD_SUFFIX, drop_schema, lock_holders, lock_key, schema_exists
from projections.errors import ProjectionError

LOCK_WAIT_S = 1.0
"""The longest one attempt waits for a lock, and so the longest a reader queues behind it."""
PAUSE_S = 1.0
"""Between attempts: readers and the projector go on meanwhile."""
REPORT_EVERY_S = 10.0


class SwapBlocked(ProjectionError):
    """The rebuilt schema could not be swapped in within the patience given: other sessions
    held the live tables. The message names them; the live projection is unchanged."""


def swap_in(
    conn: psycopg.Connection[Any],
    live: str,
    fresh: str,
    *,
    patience_s: float,
    stream: TextIO,
) -> int:
    """Swap ``fresh`` in under the name ``live`` (``conn`` in autocommit mode); return the
    attempts it took. Raises :class:`SwapBlocked` after ``patience_s`` of failed attempts."""
    started = time.monotonic()
    reported = started
    attempts = 0
    while True:
        attempts += 1
        try:
            _swap_once(conn, live, fresh)
            return attempts
        except psycopg.errors.LockNotAvailable:
            pass
        holders = lock_holders(conn, live)
        waited = time.monotonic() - started
        if waited >= patience_s:
            raise SwapBlocked(
                f"could not swap the rebuilt projection in for {live} within "
                f"{patience_s:g} s ({attempts} attempts): {holders}. End them "
                "(SELECT pg_terminate_backend(pid)) or let them finish, then run the rebuild "
                "again; the live projection is unchanged"
            )
        if time.monotonic() - reported >= REPORT_EVERY_S:
            reported = time.monotonic()
            print(f"rebuild: waiting {waited:.0f} s to swap in: {holders}", file=stream)
        time.sleep(PAUSE_S)


def _swap_once(conn: psycopg.Connection[Any], live: str, fresh: str) -> None:
    old = live + OLD_SUFFIX
    with conn.transaction():
        # Writers of the live schema take this lock per batch: none is mid-batch now. It is
        # waited for without a limit (a batch ends; readers never take it), so a projector
        # whose batches outlast the lock wait cannot starve the swap.
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(live),))
        conn.execute(
            "SELECT set_config('lock_timeout', %s, true)", (str(round(LOCK_WAIT_S * 1000)),)
        )
        drop_schema(conn, old)
        if schema_exists(conn, live):
            conn.execute(
                sql.SQL("ALTER SCHEMA {} RENAME TO {}").format(
                    sql.Identifier(live), sql.Identifier(old)
                )
            )
        conn.execute(
            sql.SQL("ALTER SCHEMA {} RENAME TO {}").format(
                sql.Identifier(fresh), sql.Identifier(live)
            )
        )
        drop_schema(conn, old)
