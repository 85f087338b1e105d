"""Read queries over the projection, shared by the CLI and the HTTP API.

Every function takes an open connection and the schema, returns plain JSON-ready values
(``dict``/``list``/``str``/``int``/``None``) and passes every user-supplied value as a query
parameter; identifiers go through :class:`psycopg.sql.Identifier`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import orjson
import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from projections.db import connect, describe_dsn, schema_exists, schema_name
from projections.errors import ProjectionUnavailable
from streams.settings import Settings

Json = dict[str, Any]

# The keys of `sluicegate stats --json` and GET /v1/stats, in CONTRACT.md's order.
STATS_KEYS: tuple[str, ...] = (
    "deliveries",
    "runs_admitted",
    "duplicates",
    "conflicts",
    "rejected",
    "branch_launches",
    "branch_relaunches",
    "expired_at_dequeue",
    "expired_before_send",
    "superseded",
    "actions_dispatched",
    "unresolved_attempt",
    "holds",
)
# Counts broken down by reason (objects); the rest are plain integers.
BY_REASON: frozenset[str] = frozenset({"duplicates", "rejected"})

PROJECTOR_HINT = "is `sluicegate projector` running and caught up?"


def iso(ms: int | None) -> str | None:
    """Epoch milliseconds as RFC 3339 UTC with milliseconds, ``None`` stays ``None``."""
    if ms is None:
        return None
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@contextmanager
def reader(settings: Settings) -> Iterator[tuple[psycopg.Connection[Any], str]]:
    """An autocommit connection and the schema to read.

    Raises :class:`ProjectionUnavailable` when PostgreSQL is unreachable or the projection
    schema does not exist yet.
    """
    schema = schema_name(settings.topic_prefix)
    conn = connect(settings.pg_dsn, autocommit=True)
    try:
        ensure_readable(conn, schema, settings)
        yield conn, schema
    finally:
        conn.close()


def ensure_readable(conn: psycopg.Connection[Any], schema: str, settings: Settings) -> None:
    """Raise :class:`ProjectionUnavailable` unless ``schema`` holds a projection."""
    if not schema_exists(conn, schema):
        raise ProjectionUnavailable(
            f"there is no projection for topic prefix {settings.topic_prefix!r} (schema "
            f"{schema} in {describe_dsn(settings.pg_dsn)}); start `sluicegate projector` "
            "or run `sluicegate projections rebuild`"
        )


def _t(schema: str, name: str) -> sql.Identifier:
    return sql.Identifier(schema, name)


def _rows(conn: psycopg.Connection[Any], query: sql.Composed, params: Any = None) -> list[Json]:
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(query, params)
        return list(cur.fetchall())


def _one(conn: psycopg.Connection[Any], query: sql.Composed, params: Any = None) -> Json | None:
    rows = _rows(conn, query, params)
    return rows[0] if rows else None


def _storable(value: str) -> bool:
    # PostgreSQL text cannot hold NUL (the projector stores U+FFFD instead), so an id with
    # one matches nothing; asking would only raise.
    return "\x00" not in value


def _payload(text: object) -> object:
    if not isinstance(text, str):
        return text
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


# -- runs ---------------------------------------------------------------------------------------


def get_run(conn: psycopg.Connection[Any], schema: str, run_id: str) -> Json | None:
    """One run with its status, slots, reruns and the deliveries answered with it."""
    if not _storable(run_id):
        return None
    run = _one(
        conn,
        sql.SQL(
            "SELECT r.*, s.status, s.changed_at_ms AS status_changed_at_ms "
            "FROM {runs} r LEFT JOIN {status} s ON s.run_id = r.run_id WHERE r.run_id = %s"
        ).format(runs=_t(schema, "runs"), status=_t(schema, "run_status")),
        (run_id,),
    )
    if run is None:
        return None
    run["status"] = run["status"] or "pending"
    run["payload"] = _payload(run.pop("payload_json"))
    run["source_time"] = iso(run["source_time_ms"])
    run["expires_at"] = iso(run["expires_at_ms"])
    run["admitted_at"] = iso(run["admitted_at_ms"])
    run["slots"] = _slots(conn, schema, run_id, list(run["slots"]))
    run["reruns"] = [
        r["run_id"]
        for r in _rows(
            conn,
            sql.SQL("SELECT run_id FROM {} WHERE rerun_of = %s ORDER BY rerun_number").format(
                _t(schema, "runs")
            ),
            (run_id,),
        )
    ]
    outcomes = _rows(
        conn,
        sql.SQL("SELECT outcome, count(*) AS n FROM {} WHERE run_id = %s GROUP BY outcome").format(
            _t(schema, "delivery_outcomes")
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
        for s in _rows(
            conn,
            sql.SQL(
                "SELECT slot, status, attempt, worker, detail, at_ms FROM {} WHERE run_id = %s"
            ).format(_t(schema, "branch_slots")),
            (run_id,),
        )
    }
    launches = {
        (s["slot"]): s
        for s in _rows(
            conn,
            sql.SQL(
                "SELECT slot, count(*) FILTER (WHERE kind = 'launched') AS launches, "
                "count(*) FILTER (WHERE kind = 'relaunched') AS relaunches, "
                "max(attempt) AS attempts FROM {} WHERE run_id = %s GROUP BY slot"
            ).format(_t(schema, "branch_launches")),
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


def get_timeline(conn: psycopg.Connection[Any], schema: str, run_id: str) -> list[Json] | None:
    """Every projected record of one run, in order: by the record's own time, then (for
    equal times) by when it was written to Kafka, then topic, partition and offset.

    Includes the deliveries answered with the run, the branch reports as the workers sent
    them and as the processor accepted them, rerun requests for it and the runs they admitted,
    and the eviction of its admission record. ``None`` when the run is unknown.
    """
    if not _storable(run_id):
        return None
    run = _one(
        conn,
        sql.SQL("SELECT admission_key FROM {} WHERE run_id = %s").format(_t(schema, "runs")),
        (run_id,),
    )
    if run is None:
        return None
    log = _t(schema, "event_log")
    rows = _rows(
        conn,
        sql.SQL(
            "SELECT src_topic, src_partition, src_offset, type, time_ms, kafka_ts_ms, record "
            "FROM {log} WHERE run_id = %(run)s "
            "OR (admission_key = %(key)s AND ("
            "  (type = 'AdmitDelivery' AND delivery_id IN "
            "     (SELECT delivery_id FROM {outcomes} WHERE run_id = %(run)s))"
            "  OR (type = 'RunAdmitted' AND record->>'rerun_of' = %(run)s)"
            "  OR (type = 'AdmissionRecordEvicted' AND record->'run_ids' ? %(run)s)))"
            "ORDER BY coalesce(time_ms, kafka_ts_ms), kafka_ts_ms, "
            "src_topic, src_partition, src_offset"
        ).format(log=log, outcomes=_t(schema, "delivery_outcomes")),
        {"run": run_id, "key": run["admission_key"]},
    )
    return [
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


# -- occurrences ---------------------------------------------------------------------------------


def get_occurrence(conn: psycopg.Connection[Any], schema: str, key: str) -> Json | None:
    """One occurrence by admission key (or by the id of one of its deliveries).

    Returns its runs, every delivery with its outcome, rerun requests and eviction, or
    ``None`` when neither an admission key nor a delivery id matches.
    """
    if not _storable(key):
        return None
    found = _occurrence(conn, schema, key)
    if found is not None:
        found["found_by"] = "admission_key"
        return found
    owner = _one(
        conn,
        sql.SQL(
            "SELECT admission_key FROM {d} WHERE delivery_id = %(id)s "
            "UNION SELECT admission_key FROM {o} WHERE delivery_id = %(id)s LIMIT 1"
        ).format(d=_t(schema, "deliveries"), o=_t(schema, "delivery_outcomes")),
        {"id": key},
    )
    if owner is None:
        return None
    found = _occurrence(conn, schema, owner["admission_key"])
    if found is not None:
        found["found_by"] = "delivery_id"
    return found


def _occurrence(conn: psycopg.Connection[Any], schema: str, key: str) -> Json | None:
    runs = _rows(
        conn,
        sql.SQL(
            "SELECT r.run_id, r.rerun_number, r.rerun_of, r.rerun_reason, r.workflow_revision, "
            "r.content_digest, r.source_time_ms, r.expires_at_ms, r.admitted_at_ms, "
            "coalesce(s.status, 'pending') AS status "
            "FROM {runs} r LEFT JOIN {status} s ON s.run_id = r.run_id "
            "WHERE r.admission_key = %s ORDER BY r.rerun_number, r.run_id"
        ).format(runs=_t(schema, "runs"), status=_t(schema, "run_status")),
        (key,),
    )
    deliveries = _rows(
        conn,
        sql.SQL(
            "SELECT coalesce(d.delivery_id, o.delivery_id) AS delivery_id, d.source, "
            "d.event_id, d.channel, coalesce(d.received_at_ms, o.received_at_ms) "
            "AS received_at_ms, o.outcome, o.reason, o.detail, o.run_id, "
            "o.differing_fields, o.decided_at_ms "
            "FROM (SELECT * FROM {d} WHERE admission_key = %(key)s) d "
            "FULL JOIN (SELECT * FROM {o} WHERE admission_key = %(key)s) o "
            "ON o.delivery_id = d.delivery_id "
            "ORDER BY 5 NULLS LAST, d.src_partition, d.src_offset, 1"
        ).format(d=_t(schema, "deliveries"), o=_t(schema, "delivery_outcomes")),
        {"key": key},
    )
    requests = _rows(
        conn,
        sql.SQL(
            "SELECT q.request_id, q.run_id, q.reason, q.requested_by, q.requested_at_ms, "
            "j.reason AS rejected_reason, a.run_id AS admitted_run_id "
            "FROM {q} q LEFT JOIN {j} j ON j.request_id = q.request_id "
            "LEFT JOIN {runs} a "
            "ON a.delivery_id = q.request_id AND a.admission_key = q.admission_key "
            "WHERE q.admission_key = %s ORDER BY q.requested_at_ms, q.request_id"
        ).format(
            q=_t(schema, "rerun_requests"),
            j=_t(schema, "rerun_rejections"),
            runs=_t(schema, "runs"),
        ),
        (key,),
    )
    eviction = _one(
        conn,
        sql.SQL("SELECT run_ids, evicted_at_ms FROM {} WHERE admission_key = %s").format(
            _t(schema, "evictions")
        ),
        (key,),
    )
    if not runs and not deliveries and not requests and eviction is None:
        return None
    for d in deliveries:
        d["outcome"] = d["outcome"] or "pending"
    return {
        "admission_key": key,
        "runs": runs,
        "deliveries": deliveries,
        "rerun_requests": requests,
        "evicted": eviction,
    }


# -- reruns --------------------------------------------------------------------------------------


def run_admission_key(conn: psycopg.Connection[Any], schema: str, run_id: str) -> str | None:
    if not _storable(run_id):
        return None
    row = _one(
        conn,
        sql.SQL("SELECT admission_key FROM {} WHERE run_id = %s").format(_t(schema, "runs")),
        (run_id,),
    )
    return None if row is None else str(row["admission_key"])


def rerun_result(conn: psycopg.Connection[Any], schema: str, request_id: str) -> Json | None:
    """The outcome of a rerun request: ``{"admitted": run}`` or ``{"rejected": reason}``."""
    admitted = _one(
        conn,
        sql.SQL("SELECT run_id FROM {} WHERE delivery_id = %s AND rerun_of IS NOT NULL").format(
            _t(schema, "runs")
        ),
        (request_id,),
    )
    if admitted is not None:
        return {"admitted": admitted["run_id"]}
    rejected = _one(
        conn,
        sql.SQL("SELECT reason FROM {} WHERE request_id = %s").format(
            _t(schema, "rerun_rejections")
        ),
        (request_id,),
    )
    if rejected is not None:
        return {"rejected": rejected["reason"]}
    return None


# -- counts --------------------------------------------------------------------------------------


def get_stats(conn: psycopg.Connection[Any], schema: str) -> Json:
    """The counts of CONTRACT.md: exactly :data:`STATS_KEYS`, reasons as objects."""
    stats: Json = {k: ({} if k in BY_REASON else 0) for k in STATS_KEYS}
    for row in _rows(
        conn,
        sql.SQL("SELECT name, label, value FROM {} ORDER BY name, label").format(
            _t(schema, "counters")
        ),
    ):
        name, label, value = row["name"], row["label"], int(row["value"])
        if name in BY_REASON:
            stats[name][label] = value
        elif name in stats:
            stats[name] += value
    return stats


def get_offsets(conn: psycopg.Connection[Any], schema: str) -> list[Json]:
    """The stored next offset of every projected partition."""
    return _rows(
        conn,
        sql.SQL("SELECT topic, partition, next_offset FROM {} ORDER BY topic, partition").format(
            _t(schema, "offsets")
        ),
    )


def get_parked_count(conn: psycopg.Connection[Any], schema: str) -> int:
    row = _one(conn, sql.SQL("SELECT count(*) AS n FROM {}").format(_t(schema, "parked")))
    return int(row["n"]) if row else 0
