"""``sluicegate runs show|timeline|rerun``: one run, read from the PostgreSQL projection.

``rerun`` also writes: it produces an ``AuthorizeRerun`` to ``deliveries`` and waits for its
outcome to appear in the projection. Errors go to stderr with exit code 1 and say what to do.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from typing import Any

from confluent_kafka import KafkaException

from projections.errors import ProjectionError
from projections.pages import TIMELINE_PAGE
from schemas.codec import encode
from schemas.commands import AuthorizeRerun
from schemas.topics import DELIVERIES
from sluicegate.commands.options import add_page_options, wait_seconds
from sluicegate.output import clip, page_line, print_json, print_pairs, print_table
from streams.clock import wall_clock_ms
from streams.kafka.clients import idempotent_producer
from streams.settings import Settings, load_settings


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    runs = subparsers.add_parser("runs", help="one run: show, timeline, rerun")
    rsub = runs.add_subparsers(dest="runs_command", metavar="ACTION", required=True)
    show = rsub.add_parser("show", help="a run with its frozen context, status and slots")
    show.add_argument("run_id", metavar="RUN_ID")
    show.add_argument("--json", action="store_true", help="print JSON instead of tables")
    show.set_defaults(func=cmd_runs_show)
    timeline = rsub.add_parser(
        "timeline", help="a run's history in order, across topics, a page at a time"
    )
    timeline.add_argument("run_id", metavar="RUN_ID")
    add_page_options(timeline, what="records", default=TIMELINE_PAGE)
    timeline.add_argument("--json", action="store_true", help="print JSON lines, one per event")
    timeline.set_defaults(func=cmd_runs_timeline)
    rerun = rsub.add_parser("rerun", help="request an authorized rerun of a run")
    rerun.add_argument("run_id", metavar="RUN_ID")
    rerun.add_argument("--reason", required=True, help="why (kept with the new run)")
    rerun.add_argument(
        "--wait",
        type=wait_seconds,
        default=10.0,
        metavar="SECONDS",
        help="wait this long for the new run to appear (0: do not wait; default 10)",
    )
    rerun.add_argument("--json", action="store_true")
    rerun.set_defaults(func=cmd_runs_rerun)


def cmd_runs_show(args: argparse.Namespace) -> int:
    from projections import queries

    run = queries.found(load_settings(), "run", args.run_id, queries.get_run)
    if args.json:
        print_json(run)
        return 0
    deliveries = run["deliveries"]
    print_pairs(
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
                "detail": clip(s["detail"]),
            }
            for s in run["slots"]
        ]
    )
    return 0


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


# What each record of the gateway's action journal established, as `label=field` tokens
# (`field` alone: labelled by its name; `=field`: its value alone). Action ids show as their
# slot (a timeline is one run's); `records_consulted` as a count.
_JOURNAL_SPECS = {
    "ActionDispatched": "=kind side quantity notional limit=limit_price",
    "ActionIntended": "=slot side quantity notional limit=limit_price client_order_id",
    "AttemptStarted": "=slot attempt reason owner=owner_instance client_order_id",
    "ReceiptRecorded": (
        "=slot attempt outcome venue_order_id executed=executed_quantity conflict "
        "error=error_code source"
    ),
    "ActionExpired": "=slot reason",
    "ActionHeld": "=slot attempt reason owner",
    "HoldResolved": "=slot resolution by=resolved_by reason",
    "RunCheckpointed": "=checkpoint_id next=next_tasks",
    "QueryRequested": "=slot query reason",
    "ExposureRecorded": "asset exposure=exposure_quantity sized=sized_quantity",
    "RecoveryStarted": "restored=checkpoint_id lookup=routed_to_lookup origin=journal_origin "
    "owner=owner_instance",
    "RecoveryReceiptRecorded": "restored=checkpoint_id next=next_permitted "
    "consulted=records_consulted advanced_to=checkpoint_advanced_to held",
    "RecoverRun": "by=requested_by reason origin=journal_origin",
    "ResolveHold": "=action_id resolution by=operator reason",
    "JournalEvicted": "=actions retention_ms",
    "DispatchRefused": "=kind reason",
}
_JOURNAL_FIELDS: dict[str, list[tuple[str, str]]] = {
    kind: [(t.partition("=")[0], t.partition("=")[2] or t) for t in spec.split()]
    for kind, spec in _JOURNAL_SPECS.items()
}
_ACTION_IDS = frozenset(
    {"action_id", "next_tasks", "next_permitted", "routed_to_lookup", "held", "actions"}
)


def _journal_value(name: str, value: Any) -> str | None:
    if name == "records_consulted":
        return str(len(value or []))
    if name in _ACTION_IDS:
        ids = value if isinstance(value, list) else [] if value is None else [value]
        return ",".join(str(v).rpartition(".")[2] for v in ids) or "-"
    return None if value in (None, "") else str(value)


def _journal_summary(fields: list[tuple[str, str]], record: dict[str, Any]) -> str:
    parts = []
    for label, name in fields:
        value = _journal_value(name, record.get(name))
        if value is not None:
            parts.append(f"{label}={value}" if label else value)
    return " ".join(parts)


def _summary(record: dict[str, Any]) -> str:
    journal = _JOURNAL_FIELDS.get(str(record.get("type")))
    if journal is not None:
        return clip(_journal_summary(journal, record), 100)  # type: ignore[return-value]
    parts = [f"{k}={record[k]}" for k in _SUMMARY_FIELDS if record.get(k) not in (None, "", [])]
    if record.get("type") == "RunStatusChanged":
        parts = [f"{record.get('previous_status')} -> {record.get('status')}"]
    return clip(" ".join(parts), 80)  # type: ignore[return-value]


def cmd_runs_timeline(args: argparse.Namespace) -> int:
    from projections import queries

    settings = load_settings()
    timeline = queries.found(
        settings,
        "run",
        args.run_id,
        lambda conn, schema, run_id: queries.get_timeline(
            conn, schema, run_id, start=args.start, limit=args.limit
        ),
    )
    events = timeline["records"]
    # Said only of a part: a whole timeline prints as it always has.
    part = len(events) < timeline["total"]
    listing = page_line(timeline["page"], len(events), timeline["total"])
    if args.json:
        for event in events:
            print_json(event)
        if part:
            print(f"sluicegate runs timeline: records {listing}", file=sys.stderr)
        return 0
    candidates = _candidates(settings, args.run_id)
    if candidates:
        print("CANDIDATES")
        print_table(
            [
                {
                    "candidate": c["candidate_id"],
                    "source": c["source_time"],
                    "enqueued": c["enqueued_at"],
                    "dequeued": c["dequeued_at"],
                    "proposed": c["proposed_at"],
                    "final gate": c["final_at"],
                    "deadline": c["expires_at"],
                    "generation": c["generation"],
                    "current met": c["current_generation"],
                    "outcome": c["outcome"],
                    "reason": c["reason"],
                }
                for c in candidates
            ]
        )
        print("\nEVENTS")
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
    if part:
        print(f"\nrecords {listing}")
    return 0


def _candidates(settings: Settings, run_id: str) -> list[Any]:
    from projections import queries

    with queries.reader(settings) as (conn, schema):
        return queries.get_run_candidates(conn, schema, run_id)


def cmd_runs_rerun(args: argparse.Namespace) -> int:
    from projections import queries

    settings = load_settings()
    if not args.reason.strip():
        raise ProjectionError("--reason must say why the run is rerun")
    key = queries.found(settings, "run", args.run_id, queries.run_admission_key)
    request = AuthorizeRerun(
        request_id=uuid.uuid4().hex,
        admission_key=key,
        run_id=args.run_id,
        reason=args.reason,
        requested_by=os.environ.get("USER") or "operator",
        requested_at_ms=wall_clock_ms(),
    )
    _produce_rerun(settings, request)
    if not args.json:
        print(f"rerun requested: request id {request.request_id}")
    if args.wait <= 0:
        if args.json:
            print_json({"request_id": request.request_id, "outcome": None})
        return 0
    outcome = _wait_for_rerun(settings, request.request_id, args.wait)
    if outcome is None:
        if args.json:
            print_json({"request_id": request.request_id, "outcome": None})
        print(
            f"the request is recorded, but no outcome appeared in the projection within "
            f"{args.wait:g} s; are `sluicegate processor` and `sluicegate projector` running? "
            f"Check later with `sluicegate occurrences show {key}`",
            file=sys.stderr,
        )
        return 1
    if args.json:
        print_json({"request_id": request.request_id, "outcome": outcome})
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
    from projections import queries

    deadline = time.monotonic() + wait_s
    with queries.reader(settings) as (conn, schema):
        while True:
            outcome = queries.rerun_result(conn, schema, request_id)
            if outcome is not None or time.monotonic() >= deadline:
                return outcome
            time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
