"""One run: its frozen context, status and slots, its timeline (a page at a time), and the
outcome of a rerun."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from projections.pages import TIMELINE_PAGE, page
from projections.queries.connection import (
    Json,
    fetch_all,
    fetch_one,
    iso,
    matchable,
    payload,
    table,
)


def get_run(conn: psycopg.Connection[Any], schema: str, run_id: str) -> Json | None:
    """One run with its status, slots, reruns and the deliveries answered with it."""
    if not matchable(run_id):
        return None
    run = fetch_one(
        conn,
        sql.SQL(
            "SELECT r.*, s.status, s.changed_at_ms AS status_changed_at_ms "
            "FROM {runs} r LEFT JOIN {status} s ON s.run_id = r.run_id WHERE r.run_id = %s"
        ).format(runs=table(schema, "runs"), status=table(schema, "run_status")),
        (run_id,),
    )
    if run is None:
        return None
    run["status"] = run["status"] or "pending"
    run["payload"] = payload(run.pop("payload_json"))
    run["source_time"] = iso(run["source_time_ms"])
    run["expires_at"] = iso(run["expires_at_ms"])
    run["admitted_at"] = iso(run["admitted_at_ms"])
    run["slots"] = _slots(conn, schema, run_id, list(run["slots"]))
    run["reruns"] = [
        r["run_id"]
        for r in fetch_all(
            conn,
            sql.SQL("SELECT run_id FROM {} WHERE rerun_of = %s ORDER BY rerun_number").format(
                table(schema, "runs")
            ),
            (run_id,),
        )
    ]
    outcomes = fetch_all(
        conn,
        sql.SQL("SELECT outcome, count(*) AS n FROM {} WHERE run_id = %s GROUP BY outcome").format(
            table(schema, "delivery_outcomes")
        ),
        (run_id,),
    )
    counts = {o["outcome"]: int(o["n"]) for o in outcomes}
    run["deliveries"] = {
        "admitted_by": run["delivery_id"],
        "duplicates": counts.get("deduplicated", 0),
        "conflicts": counts.get("conflict", 0),
    }
    return run


def _slots(
    conn: psycopg.Connection[Any], schema: str, run_id: str, declared: list[str]
) -> list[Json]:
    states = {
        s["slot"]: s
        for s in fetch_all(
            conn,
            sql.SQL(
                "SELECT slot, status, attempt, worker, detail, at_ms FROM {} WHERE run_id = %s"
            ).format(table(schema, "branch_slots")),
            (run_id,),
        )
    }
    launches = {
        (s["slot"]): s
        for s in fetch_all(
            conn,
            sql.SQL(
                "SELECT slot, count(*) FILTER (WHERE kind = 'launched') AS launches, "
                "count(*) FILTER (WHERE kind = 'relaunched') AS relaunches, "
                "max(attempt) AS attempts FROM {} WHERE run_id = %s GROUP BY slot"
            ).format(table(schema, "branch_launches")),
            (run_id,),
        )
    }
    names = declared + sorted((set(states) | set(launches)) - set(declared))
    result = []
    for name in names:
        state = states.get(name, {})
        launch = launches.get(name, {})
        attempts = max(int(launch.get("attempts") or 0), int(state.get("attempt") or 0))
        result.append(
            {
                "slot": name,
                "status": state.get("status", "not_launched"),
                "attempts": attempts,
                "launches": int(launch.get("launches") or 0),
                "relaunches": int(launch.get("relaunches") or 0),
                "worker": state.get("worker"),
                "detail": state.get("detail"),
                "updated_at_ms": state.get("at_ms"),
            }
        )
    return result


def get_timeline(
    conn: psycopg.Connection[Any],
    schema: str,
    run_id: str,
    *,
    start: int = 0,
    limit: int = TIMELINE_PAGE,
) -> Json | None:
    """One run's projected records, a page at a time: ``records`` from position ``start`` (0 is
    the first) up to ``limit`` of them, ``total``, and ``page`` (``from``, ``limit``, ``next``:
    see :func:`projections.pages.page`). ``None`` when the run is unknown.

    In order: by the record's own time, then (for equal times) by when it was written to
    Kafka, then topic, partition and offset. Includes the deliveries answered with the run,
    the branch reports as the workers sent them and as the processor accepted them, rerun
    requests for it and the runs they admitted, the eviction of its admission record, and the
    gateway's records (dispatch, the action journal, checkpoints, holds, recoveries and
    operator commands).

    The deliveries are joined, not looked up with ``IN (subquery)``: past what fits in
    ``work_mem`` (about 100,000 ids) PostgreSQL scanned the whole subquery once per record,
    and the timeline of a run delivered 1,000,000 times did not finish in minutes.
    """
    if not matchable(run_id):
        return None
    run = fetch_one(
        conn,
        sql.SQL("SELECT admission_key FROM {} WHERE run_id = %s").format(table(schema, "runs")),
        (run_id,),
    )
    log = table(schema, "event_log")
    if run is None:
        # A run whose admission is not projected (yet) may still have gateway records.
        known = fetch_one(
            conn, sql.SQL("SELECT 1 AS n FROM {} WHERE run_id = %s LIMIT 1").format(log), (run_id,)
        )
        if known is None:
            return None
        run = {"admission_key": None}
    # Three disjoint parts: the run's own records, the deliveries answered with it, and the
    # records of its occurrence that name it (a rerun of it, an eviction).
    matching = sql.SQL(
        "SELECT e.* FROM {log} e WHERE e.run_id = %(run)s "
        "UNION ALL SELECT e.* FROM {log} e JOIN {outcomes} o ON o.delivery_id = e.delivery_id "
        "WHERE o.run_id = %(run)s AND e.admission_key = %(key)s AND e.type = 'AdmitDelivery' "
        "AND e.run_id IS DISTINCT FROM %(run)s "
        "UNION ALL SELECT e.* FROM {log} e WHERE e.admission_key = %(key)s "
        "AND e.run_id IS DISTINCT FROM %(run)s AND ("
        "  (e.type = 'RunAdmitted' AND e.record->>'rerun_of' = %(run)s)"
        "  OR (e.type = 'AdmissionRecordEvicted' AND e.record->'run_ids' ? %(run)s))"
    ).format(log=log, outcomes=table(schema, "delivery_outcomes"))
    params = {"run": run_id, "key": run["admission_key"], "limit": limit, "start": start}
    # The total comes with the page (one pass over the records, not two: 3.1 s against 4.5 s
    # for the first page of a run delivered 1,000,000 times); a page past the end has no row
    # to carry it, so only then is it counted on its own.
    rows = fetch_all(
        conn,
        sql.SQL(
            "SELECT src_topic, src_partition, src_offset, type, time_ms, kafka_ts_ms, record, "
            "count(*) OVER () AS total FROM ({matching}) t "
            "ORDER BY coalesce(time_ms, kafka_ts_ms), kafka_ts_ms, "
            "src_topic, src_partition, src_offset LIMIT %(limit)s OFFSET %(start)s"
        ).format(matching=matching),
        params,
    )
    if rows:
        count = int(rows[0]["total"])
    elif start == 0:
        count = 0
    else:
        counted = fetch_one(
            conn,
            sql.SQL("SELECT count(*) AS n FROM ({matching}) t").format(matching=matching),
            params,
        )
        count = int(counted["n"]) if counted is not None else 0
    records = [
        {
            "time_ms": r["time_ms"] if r["time_ms"] is not None else r["kafka_ts_ms"],
            "time": iso(r["time_ms"] if r["time_ms"] is not None else r["kafka_ts_ms"]),
            "topic": r["src_topic"],
            "partition": r["src_partition"],
            "offset": r["src_offset"],
            "type": r["type"],
            "record": r["record"],
        }
        for r in rows
    ]
    return {"records": records, "total": count, "page": page(start, limit, len(records), count)}


def run_admission_key(conn: psycopg.Connection[Any], schema: str, run_id: str) -> str | None:
    if not matchable(run_id):
        return None
    row = fetch_one(
        conn,
        sql.SQL("SELECT admission_key FROM {} WHERE run_id = %s").format(table(schema, "runs")),
        (run_id,),
    )
    return None if row is None else str(row["admission_key"])


def rerun_result(conn: psycopg.Connection[Any], schema: str, request_id: str) -> Json | None:
    """The outcome of a rerun request: ``{"admitted": run}`` or ``{"rejected": reason}``."""
    admitted = fetch_one(
        conn,
        sql.SQL("SELECT run_id FROM {} WHERE delivery_id = %s AND rerun_of IS NOT NULL").format(
            table(schema, "runs")
        ),
        (request_id,),
    )
    if admitted is not None:
        return {"admitted": admitted["run_id"]}
    rejected = fetch_one(
        conn,
        sql.SQL("SELECT reason FROM {} WHERE request_id = %s").format(
            table(schema, "rerun_rejections")
        ),
        (request_id,),
    )
    if rejected is not None:
        return {"rejected": rejected["reason"]}
    return None
