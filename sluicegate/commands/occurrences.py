"""``sluicegate occurrences show``: one occurrence and its deliveries, a page at a time, each
counted (the projection)."""

from __future__ import annotations

import argparse

from projections.pages import DELIVERIES_PAGE
from sluicegate.commands.options import add_page_options
from sluicegate.output import clip, page_line, print_json, print_pairs, print_table
from streams.settings import load_settings


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    occ = subparsers.add_parser("occurrences", help="one occurrence and its deliveries")
    osub = occ.add_subparsers(dest="occurrences_command", metavar="ACTION", required=True)
    oshow = osub.add_parser("show", help="by admission key, or by the id of one of its deliveries")
    oshow.add_argument("key", metavar="ADMISSION_KEY")
    add_page_options(oshow, what="deliveries", default=DELIVERIES_PAGE)
    oshow.add_argument("--json", action="store_true")
    oshow.set_defaults(func=cmd_occurrences_show)


def cmd_occurrences_show(args: argparse.Namespace) -> int:
    from projections import queries

    found = queries.found(
        load_settings(),
        "occurrence or delivery",
        args.key,
        lambda conn, schema, key: queries.get_occurrence(
            conn, schema, key, start=args.start, limit=args.limit
        ),
    )
    if args.json:
        print_json(found)
        return 0
    evicted = found["evicted"]
    print_pairs(
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
    counts = dict(found["delivery_counts"])
    total = counts.pop("total")
    listing = page_line(found["deliveries_page"], len(found["deliveries"]), total, counts)
    print(f"\nDELIVERIES ({listing})")
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
                    "reason": clip(q["reason"], 40),
                    "outcome": q["admitted_run_id"]
                    or (f"rejected: {q['rejected_reason']}" if q["rejected_reason"] else "pending"),
                }
                for q in found["rerun_requests"]
            ]
        )
    return 0
