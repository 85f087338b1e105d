"""One occurrence, by admission key or by the id of one of its deliveries; its deliveries a
page at a time (:mod:`projections.pages`), counted in full."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from projections.pages import DELIVERIES_PAGE, page
from projections.queries.connection import Json, fetch_all, fetch_one, matchable, table


def get_occurrence(
    conn: psycopg.Connection[Any],
    schema: str,
    key: str,
    *,
    start: int = 0,
    limit: int = DELIVERIES_PAGE,
) -> Json | None:
    """One occurrence by admission key (or by the id of one of its deliveries).

    Returns its runs, its rerun requests and eviction, ``delivery_counts`` (``total`` and one
    count per outcome, ``pending`` for a delivery with none yet) and the deliveries from
    position ``start`` (0 is the first) up to ``limit`` of them, in a fixed order (received,
    then partition and offset, then id), with ``deliveries_page``: ``from``, ``limit`` and
    ``next``, the ``start`` of the following page or ``None`` after the last. ``None`` when
    neither an admission key nor a delivery id matches. Positions are stable while no
    delivery is added ahead of them (the projector adds them in the order received).
    """
    if not matchable(key):
        return None
    found = _occurrence(conn, schema, key, start, limit)
    if found is not None:
        found["found_by"] = "admission_key"
        return found
    owner = fetch_one(
        conn,
        sql.SQL(
            "SELECT admission_key FROM {d} WHERE delivery_id = %(id)s "
            "UNION SELECT admission_key FROM {o} WHERE delivery_id = %(id)s LIMIT 1"
        ).format(d=table(schema, "deliveries"), o=table(schema, "delivery_outcomes")),
        {"id": key},
    )
    if owner is None:
        return None
    found = _occurrence(conn, schema, owner["admission_key"], start, limit)
    if found is not None:
        found["found_by"] = "delivery_id"
    return found


def _occurrence(
    conn: psycopg.Connection[Any], schema: str, key: str, start: int, limit: int
) -> Json | None:
    runs = fetch_all(
        conn,
        sql.SQL(
            "SELECT r.run_id, r.rerun_number, r.rerun_of, r.rerun_reason, r.workflow_revision, "
            "r.content_digest, r.source_time_ms, r.expires_at_ms, r.admitted_at_ms, "
            "coalesce(s.status, 'pending') AS status "
            "FROM {runs} r LEFT JOIN {status} s ON s.run_id = r.run_id "
            "WHERE r.admission_key = %s ORDER BY r.rerun_number, r.run_id"
        ).format(runs=table(schema, "runs"), status=table(schema, "run_status")),
        (key,),
    )
    deliveries = fetch_all(
        conn,
        sql.SQL(
            "SELECT coalesce(d.delivery_id, o.delivery_id) AS delivery_id, d.source, "
            "d.event_id, d.channel, coalesce(d.received_at_ms, o.received_at_ms) "
            "AS received_at_ms, o.outcome, o.reason, o.detail, o.run_id, "
            "o.differing_fields, o.decided_at_ms "
            "FROM (SELECT * FROM {d} WHERE admission_key = %(key)s) d "
            "FULL JOIN (SELECT * FROM {o} WHERE admission_key = %(key)s) o "
            "ON o.delivery_id = d.delivery_id "
            "ORDER BY 5 NULLS LAST, d.src_partition, d.src_offset, 1 "
            "LIMIT %(limit)s OFFSET %(start)s"
        ).format(d=table(schema, "deliveries"), o=table(schema, "delivery_outcomes")),
        {"key": key, "limit": limit, "start": start},
    )
    counts = {
        row["outcome"]: row["n"]
        for row in fetch_all(
            conn,
            sql.SQL(
                "SELECT coalesce(o.outcome, 'pending') AS outcome, count(*) AS n "
                "FROM (SELECT delivery_id FROM {d} WHERE admission_key = %(key)s) d "
                "FULL JOIN (SELECT delivery_id, outcome FROM {o} WHERE admission_key = %(key)s) o "
                "ON o.delivery_id = d.delivery_id GROUP BY 1 ORDER BY 1"
            ).format(d=table(schema, "deliveries"), o=table(schema, "delivery_outcomes")),
            {"key": key},
        )
    }
    total = sum(counts.values())
    requests = fetch_all(
        conn,
        sql.SQL(
            "SELECT q.request_id, q.run_id, q.reason, q.requested_by, q.requested_at_ms, "
            "j.reason AS rejected_reason, a.run_id AS admitted_run_id "
            "FROM {q} q LEFT JOIN {j} j ON j.request_id = q.request_id "
            "LEFT JOIN {runs} a "
            "ON a.delivery_id = q.request_id AND a.admission_key = q.admission_key "
            "WHERE q.admission_key = %s ORDER BY q.requested_at_ms, q.request_id"
        ).format(
            q=table(schema, "rerun_requests"),
            j=table(schema, "rerun_rejections"),
            runs=table(schema, "runs"),
        ),
        (key,),
    )
    eviction = fetch_one(
        conn,
        sql.SQL("SELECT run_ids, evicted_at_ms FROM {} WHERE admission_key = %s").format(
            table(schema, "evictions")
        ),
        (key,),
    )
    if not runs and not total and not requests and eviction is None:
        return None
    for d in deliveries:
        d["outcome"] = d["outcome"] or "pending"
    return {
        "admission_key": key,
        "runs": runs,
        "delivery_counts": {"total": total, **counts},
        "deliveries": deliveries,
        "deliveries_page": page(start, limit, len(deliveries), total),
        "rerun_requests": requests,
        "evicted": eviction,
    }
