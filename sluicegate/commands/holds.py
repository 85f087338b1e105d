"""``sluicegate holds list|resolve``: held actions, and their audited resolution.

``resolve`` asks the run's owning gateway (a ``ResolveHold`` on ``actions``); the gateway
refuses a resolution that does not fit the hold, and the answer is read back from the
projection.
"""

from __future__ import annotations

import argparse
import sys
import uuid

from consumers.gateway.operator import RESOLUTIONS, run_of, send_commands
from projections.errors import NotInProjection
from projections.pages import HOLDS_PAGE
from schemas.commands import ResolveHold
from sluicegate.commands.gateway import operator_name, wait_for
from sluicegate.commands.options import add_page_options, wait_seconds
from sluicegate.errors import SluicegateError
from sluicegate.output import page_line, print_json, print_table
from streams.clock import wall_clock_ms
from streams.settings import load_settings


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    holds = subparsers.add_parser("holds", help="held actions: list, resolve")
    hsub = holds.add_subparsers(dest="holds_command", metavar="ACTION", required=True)
    listing = hsub.add_parser("list", help="open holds (owner, reason, since), oldest first")
    listing.add_argument("--all", action="store_true", help="every hold, with its resolution")
    add_page_options(listing, what="holds", default=HOLDS_PAGE)
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(func=cmd_holds_list)
    resolve = hsub.add_parser("resolve", help="resolve a held action (audit-recorded)")
    resolve.add_argument("action_id", metavar="ACTION_ID")
    resolve.add_argument("--reason", required=True, help="why (kept in the audit record)")
    resolve.add_argument(
        "--resolution",
        choices=RESOLUTIONS,
        default="retry_lookup",
        help="retry_lookup (default: look the order up again), confirm_absent (you checked: "
        "it never reached the venue; the gateway may send it once more), abandon (close it; "
        "nothing more is sent)",
    )
    resolve.add_argument("--wait", type=wait_seconds, default=15.0, metavar="SECONDS")
    resolve.add_argument("--json", action="store_true")
    resolve.set_defaults(func=cmd_holds_resolve)


def cmd_holds_list(args: argparse.Namespace) -> int:
    from projections import queries
    from projections.queries import journal as journal_queries

    settings = load_settings()
    with queries.reader(settings) as (conn, schema):
        found = journal_queries.list_holds(
            conn, schema, resolved=args.all, start=args.start, limit=args.limit
        )
    holds = found["holds"]
    # Said only of a part: a whole list prints as it always has.
    part = len(holds) < found["total"]
    listing = page_line(found["page"], len(holds), found["total"])
    if args.json:
        print_json(found)
        return 0
    print_table(
        [
            {
                "action": h["action_id"],
                "attempt": h["attempt"],
                "owner": h["owner"],
                "reason": h["reason"],
                "since": queries.iso(h["held_since_ms"]),
                "resolution": h["resolution"] or ("-" if args.all else None),
                "detail": (h["detail"] or "")[:60],
            }
            for h in holds
        ]
    )
    if part:
        print(f"\nholds {listing}")
    return 0


def cmd_holds_resolve(args: argparse.Namespace) -> int:
    from projections import queries
    from projections.queries import journal as journal_queries

    settings = load_settings()
    if not args.reason.strip():
        raise SluicegateError("--reason must say why the hold is resolved (it is audited)")
    run_id = run_of(args.action_id)
    with queries.reader(settings) as (conn, schema):
        held = journal_queries.open_hold(conn, schema, args.action_id)
    if held is None:
        raise NotInProjection("open hold of", args.action_id, "see `sluicegate holds list`")
    requested_at = wall_clock_ms()
    command = ResolveHold(
        uuid.uuid4().hex,
        run_id,
        args.action_id,
        args.resolution,
        args.reason,
        operator_name(),
        requested_at,
    )
    send_commands(settings, [command])
    if args.wait <= 0:
        print(f"resolution requested: {command.request_id}", file=sys.stderr)
        return 0
    found = wait_for(
        settings,
        args.wait,
        lambda c, s: {
            args.action_id: journal_queries.resolution_since(c, s, args.action_id, requested_at)
        },
    )
    resolution = found[args.action_id]
    if args.json:
        print_json({"request_id": command.request_id, "resolution": resolution})
    if resolution is None:
        print(
            f"no resolution recorded within {args.wait:g} s: the gateway refuses one that does "
            f"not fit the hold ({held['reason']}: retry_lookup fits a hold that ran out of "
            "budget, confirm_absent one whose order was never found, abandon every hold); "
            "see `sluicegate runs timeline " + run_id + "`",
            file=sys.stderr,
        )
        return 1
    if not args.json:
        print(
            f"{args.action_id}: {resolution['resolution']} by {resolution['resolved_by']} at "
            f"{queries.iso(resolution['resolved_at_ms'])}"
        )
    return 0
