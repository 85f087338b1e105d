"""Read queries over ``dead_letters``: what the stream apps could not decide (HTTP).

Same rules as every module of :mod:`projections.queries`: an open connection and the schema
in, plain JSON-ready values out, every user-supplied value a query parameter.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from projections.pages import page
from projections.queries.connection import Json, fetch_all, fetch_one, table


def list_dead_letters(
    conn: psycopg.Connection[Any], schema: str, *, start: int, limit: int, kind: str | None = None
) -> Json:
    """Dead letters from position ``start`` (0 is the oldest) up to ``limit`` of them, in
    the topic's order, with their ``total`` and ``page`` (``from``, ``limit``, ``next``); of
    one ``kind`` only if given (positions then count that kind's). Positions hold while dead
    letters are added: they come after the last. The original bytes are not listed (up to a
    record's size each), only their length (``value_bytes``, ``null`` when there are none);
    ``sluicegate replay --topic dead-letters`` prints them."""
    where = sql.SQL("") if kind is None else sql.SQL("WHERE kind = %(kind)s ")
    letters = fetch_all(
        conn,
        sql.SQL(
            "SELECT src_topic, src_partition, src_offset, key, kind, reason, origin, "
            "octet_length(value) AS value_bytes, kafka_ts_ms FROM {} {}"
            "ORDER BY src_topic, src_partition, src_offset LIMIT %(limit)s OFFSET %(start)s"
        ).format(table(schema, "dead_letters"), where),
        {"limit": limit, "start": start, "kind": kind},
    )
    counted = fetch_one(
        conn,
        sql.SQL("SELECT count(*) AS n FROM {} {}").format(table(schema, "dead_letters"), where),
        {"kind": kind},
    )
    total = int(counted["n"]) if counted else 0
    return {
        "dead_letters": letters,
        "total": total,
        "page": page(start, limit, len(letters), total),
    }
