"""The read side: ``runs show|timeline|rerun``, ``occurrences show``, ``stats``, ``replay``.

Everything but ``replay`` reads the PostgreSQL projection (``sluicegate projector`` keeps it
current); ``replay`` reads Kafka. Readable tables by default, ``--json`` for machines; errors
go to stderr with exit code 1 and say what to do.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from typing import Any

import orjson
from confluent_kafka import KafkaException

from projections import queries
from projections.errors import NotFound, ProjectionError
from projections.progress import Progress
from schemas.codec import encode
from schemas.commands import AuthorizeRerun
from schemas.topics import DELIVERIES
from sluicegate.output import print_table
from streams.adapters.replay import ReplayFilter, Writer, parse_time, read_topics, resolve_topics
from streams.kafka.clients import idempotent_producer
from streams.settings import Settings, load_settings


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    runs = subparsers.add_parser("runs", help="one run: show, timeline, rerun")
    rsub = runs.add_subparsers(dest="runs_command", metavar="ACTION", required=True)
    show = rsub.add_parser("show", help="a run with its frozen context, status and slots")
    show.add_argument("run_id", metavar="RUN_ID")
    show.add_argument("--json", action="store_true", help="print JSON instead of tables")
    show.set_defaults(func=cmd_runs_show)
    timeline = rsub.add_parser("timeline", help="a run's whole history in order, across topics")
    timeline.add_argument("run_id", metavar="RUN_ID")
    timeline.add_argument("--json", action="store_true", help="print JSON lines, one per event")
    timeline.set_defaults(func=cmd_runs_timeline)
    rerun = rsub.add_parser("rerun", help="request an authorized rerun of a run")
    rerun.add_argument("run_id", metavar="RUN_ID")
    rerun.add_argument("--reason", required=True, help="why (kept with the new run)")
    rerun.add_argument(
        "--wait",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="wait this long for the new run to appear (0: do not wait; default 10)",
    )
    rerun.add_argument("--json", action="store_true")
    rerun.set_defaults(func=cmd_runs_rerun)

    occ = subparsers.add_parser("occurrences", help="one occurrence and every delivery of it")
    osub = occ.add_subparsers(dest="occurrences_command", metavar="ACTION", required=True)
    oshow = osub.add_parser("show", help="by admission key, or by the id of one of its deliveries")
    oshow.add_argument("key", metavar="ADMISSION_KEY")
    oshow.add_argument("--json", action="store_true")
    oshow.set_defaults(func=cmd_occurrences_show)

    stats = subparsers.add_parser("stats", help="the counts (deliveries, runs, duplicates, ...)")
    stats.add_argument("--json", action="store_true")
    stats.set_defaults(func=cmd_stats)

    replay = subparsers.add_parser(
        "replay", help="topics decoded to JSON lines or CSV, for analysis (reads Kafka)"
    )
    replay.add_argument(
        "--topic",
        action="append",
        metavar="NAME",
        help="a topic to read (short name such as runs; repeatable; default: every event topic)",
    )
    replay.add_argument("--format", choices=("jsonl", "csv"), default="jsonl")
    replay.add_argument("--since", help="from this record time (RFC 3339 or epoch ms), inclusive")
    replay.add_argument("--until", help="up to this record time (RFC 3339 or epoch ms), exclusive")
    replay.add_argument("--subscription", help="only records of this subscription")
    replay.add_argument("--run", metavar="RUN_ID", help="only records of this run")
    replay.add_argument("--scope", help="only records of this decision scope key")
    replay.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    replay.set_defaults(func=cmd_replay)


def _json(value: Any) -> None:
    sys.stdout.write(orjson.dumps(value).decode("utf-8") + "\n")


def _pairs(pairs: list[tuple[str, object]]) -> None:
    width = max(len(k) for k, _ in pairs)
    for key, value in pairs:
        shown = "-" if value is None or value in ("", []) else value
        if isinstance(shown, list):
            shown = ", ".join(str(v) for v in shown)
        print(f"{key.ljust(width)}  {shown}")


# -- runs ---------------------------------------------------------------------------------------


def cmd_runs_show(args: argparse.Namespace) -> int:
    settings = load_settings()
    with queries.reader(settings) as (conn, schema):
        run = queries.get_run(conn, schema, args.run_id)
    if run is None:
        raise NotFound("run", args.run_id, queries.PROJECTOR_HINT)
    if args.json:
        _json(run)
        return 0
    deliveries = run["deliveries"]
    _pairs(
        [
            ("run", run["run_id"]),
            ("status", f"{run['status']} (since {queries.iso(run['status_changed_at_ms'])})"),
            ("admission key", run["admission_key"]),
            ("destination", f"{run['subscription']} / {run['environment']}"),
            ("workflow revision", run["workflow_revision"]),
            ("source", f"{run['source']} (event id {run['event_id'] or '-'})"),
            ("content digest", run["content_digest"]),
            ("source time", run["source_time"]),
            (
                "deadline",
                f"{run['expires_at']} ({run['validity_source_time']} + "
                f"{run['validity_window_ms']} ms)",
            ),
            ("admitted", run["admitted_at"]),
            ("scope", run["scope_key"]),
            (
                "rerun",
                f"#{run['rerun_number']} of {run['rerun_of']}: {run['rerun_reason']}"
                if run["rerun_of"]
                else None,
            ),
            ("reruns", run["reruns"]),
            (
                "deliveries",
                f"admitted by {deliveries['admitted_by']}; "
                f"{deliveries['duplicates']} duplicate(s), "
                f"{deliveries['conflicts']} conflict(s)",
            ),
        ]
    )
    print()
    print_table(
        [
            {
                "slot": s["slot"],
                "status": s["status"],
                "attempts": s["attempts"],
                "launches": s["launches"],
                "relaunches": s["relaunches"],
                "worker": s["worker"],
                "updated": queries.iso(s["updated_at_ms"]),
                "detail": _clip(s["detail"]),
            }
            for s in run["slots"]
        ]
    )
    return 0


def _clip(value: object, width: int = 60) -> object:
    if isinstance(value, str):
        value = value.replace("\n", " ")
        return value if len(value) <= width else value[: width - 3] + "..."
    return value


_SUMMARY_FIELDS = (
    "delivery_id",
    "status",
    "slot",
    "attempt",
    "reason",
    "worker",
    "error",
    "request_id",
    "rerun_of",
)


def _summary(record: dict[str, Any]) -> str:
    parts = [f"{k}={record[k]}" for k in _SUMMARY_FIELDS if record.get(k) not in (None, "", [])]
    if record.get("type") == "RunStatusChanged":
        parts = [f"{record.get('previous_status')} -> {record.get('status')}"]
    return _clip(" ".join(parts), 80)  # type: ignore[return-value]


def cmd_runs_timeline(args: argparse.Namespace) -> int:
    settings = load_settings()
    with queries.reader(settings) as (conn, schema):
        events = queries.get_timeline(conn, schema, args.run_id)
    if events is None:
        raise NotFound("run", args.run_id, queries.PROJECTOR_HINT)
    if args.json:
        for event in events:
            _json(event)
        return 0
    print_table(
        [
            {
                "time": e["time"],
                "topic": e["topic"],
                "at": f"{e['partition']}@{e['offset']}",
                "type": e["type"],
                "detail": _summary(e["record"]),
            }
            for e in events
        ]
    )
    return 0


def cmd_runs_rerun(args: argparse.Namespace) -> int:
    settings = load_settings()
    if not args.reason.strip():
        raise ProjectionError("--reason must say why the run is rerun")
    with queries.reader(settings) as (conn, schema):
        key = queries.run_admission_key(conn, schema, args.run_id)
    if key is None:
        raise NotFound("run", args.run_id, queries.PROJECTOR_HINT)
    request = AuthorizeRerun(
        request_id=uuid.uuid4().hex,
        admission_key=key,
        run_id=args.run_id,
        reason=args.reason,
        requested_by=os.environ.get("USER") or "operator",
        requested_at_ms=int(time.time() * 1000),
    )
    _produce_rerun(settings, request)
    if not args.json:
        print(f"rerun requested: request id {request.request_id}")
    if args.wait <= 0:
        if args.json:
            _json({"request_id": request.request_id, "outcome": None})
        return 0
    outcome = _wait_for_rerun(settings, request.request_id, args.wait)
    if outcome is None:
        if args.json:
            _json({"request_id": request.request_id, "outcome": None})
        print(
            f"the request is recorded, but no outcome appeared in the projection within "
            f"{args.wait:g} s; are `sluicegate processor` and `sluicegate projector` running? "
            f"Check later with `sluicegate occurrences show {key}`",
            file=sys.stderr,
        )
        return 1
    if args.json:
        _json({"request_id": request.request_id, "outcome": outcome})
    elif "admitted" in outcome:
        print(f"new run: {outcome['admitted']} (rerun of {args.run_id})")
    else:
        print(f"rerun rejected: {outcome['rejected']}", file=sys.stderr)
    return 0 if "admitted" in outcome else 1


def _produce_rerun(settings: Settings, request: AuthorizeRerun) -> None:
    errors: list[str] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    producer = idempotent_producer(settings)
    try:
        producer.produce(
            settings.topic(DELIVERIES),
            key=request.admission_key.encode("utf-8"),
            value=encode(request),
            on_delivery=delivered,
        )
    except KafkaException as e:
        raise ProjectionError(f"cannot produce the rerun request: {e}") from e
    if producer.flush(30) or errors:
        raise ProjectionError(
            f"Kafka did not acknowledge the rerun request ({'; '.join(errors) or 'timeout'}); "
            "nothing was requested, run the command again"
        )


def _wait_for_rerun(settings: Any, request_id: str, wait_s: float) -> dict[str, Any] | None:
    deadline = time.monotonic() + wait_s
    with queries.reader(settings) as (conn, schema):
        while True:
            outcome = queries.rerun_result(conn, schema, request_id)
            if outcome is not None or time.monotonic() >= deadline:
                return outcome
            time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))


# -- occurrences, stats -------------------------------------------------------------------------


def cmd_occurrences_show(args: argparse.Namespace) -> int:
    settings = load_settings()
    with queries.reader(settings) as (conn, schema):
        found = queries.get_occurrence(conn, schema, args.key)
    if found is None:
        raise NotFound("occurrence or delivery", args.key, queries.PROJECTOR_HINT)
    if args.json:
        _json(found)
        return 0
    evicted = found["evicted"]
    _pairs(
        [
            ("admission key", found["admission_key"]),
            ("found by", found["found_by"]),
            ("evicted", f"{queries.iso(evicted['evicted_at_ms'])}" if evicted else None),
        ]
    )
    print("\nRUNS")
    print_table(
        [
            {
                "run": r["run_id"],
                "rerun": r["rerun_number"],
                "status": r["status"],
                "revision": r["workflow_revision"],
                "digest": r["content_digest"],
                "deadline": queries.iso(r["expires_at_ms"]),
                "admitted": queries.iso(r["admitted_at_ms"]),
            }
            for r in found["runs"]
        ]
    )
    print("\nDELIVERIES")
    print_table(
        [
            {
                "delivery": d["delivery_id"],
                "received": queries.iso(d["received_at_ms"]),
                "channel": d["channel"],
                "outcome": d["outcome"],
                "reason": d["reason"],
                "run": d["run_id"],
            }
            for d in found["deliveries"]
        ]
    )
    if found["rerun_requests"]:
        print("\nRERUN REQUESTS")
        print_table(
            [
                {
                    "request": q["request_id"],
                    "of": q["run_id"],
                    "by": q["requested_by"],
                    "reason": _clip(q["reason"], 40),
                    "outcome": q["admitted_run_id"]
                    or (f"rejected: {q['rejected_reason']}" if q["rejected_reason"] else "pending"),
                }
                for q in found["rerun_requests"]
            ]
        )
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    settings = load_settings()
    with queries.reader(settings) as (conn, schema):
        stats = queries.get_stats(conn, schema)
    if args.json:
        _json(stats)
        return 0
    names = [k for k in stats] + [
        f"  {r}" for v in stats.values() if isinstance(v, dict) for r in v
    ]
    width = max(len(n) for n in names) + 2
    for key, value in stats.items():
        if isinstance(value, dict):
            print(f"{key.ljust(width)}{sum(value.values())}")
            for reason, count in sorted(value.items()):
                print(f"  {reason.ljust(width - 2)}{count}")
        else:
            print(f"{key.ljust(width)}{value}")
    return 0


# -- replay -------------------------------------------------------------------------------------


def cmd_replay(args: argparse.Namespace) -> int:
    settings = load_settings()
    topics = resolve_topics(settings, args.topic)
    filt = ReplayFilter(
        since_ms=parse_time(args.since) if args.since else None,
        until_ms=parse_time(args.until) if args.until else None,
        subscription=args.subscription,
        run=args.run,
        scope=args.scope,
    )
    writer = Writer(sys.stdout, args.format)
    bar = Progress("replay", 0, sys.stderr, enabled=not args.no_progress)

    def total(n: int) -> None:
        bar.total = n

    written = undecodable = 0
    try:
        for item in read_topics(settings, topics, filt.since_ms, total, bar.advance):
            if item.error is not None:
                undecodable += 1
                if not filt.keeps_time(item.timestamp_ms):
                    continue
                print(
                    f"replay: {item.topic}[{item.partition}]@{item.offset}: {item.error}",
                    file=sys.stderr,
                )
                writer.write(item)
                continue
            if filt.keeps(item.record, item.key, item.timestamp_ms):
                writer.write(item)
                written += 1
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader (e.g. `head`) has enough; not an error.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    finally:
        bar.close()
    if undecodable:
        print(f"replay: {undecodable} message(s) could not be decoded (see above)", file=sys.stderr)
    return 0
