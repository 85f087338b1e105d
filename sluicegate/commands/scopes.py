"""``sluicegate scopes show``: one decision scope at the gate (the projection)."""

from __future__ import annotations

import argparse

from sluicegate.output import print_json, print_table
from streams.settings import load_settings


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    scopes = subparsers.add_parser("scopes", help="a decision scope of the gate")
    ssub = scopes.add_subparsers(dest="scopes_command", metavar="ACTION", required=True)
    show = ssub.add_parser(
        "show", help="current generation per kind, pending candidates, recent decisions"
    )
    show.add_argument("scope_key", metavar="SCOPE_KEY")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=cmd_scopes_show)


def cmd_scopes_show(args: argparse.Namespace) -> int:
    from projections import queries

    found = queries.found(load_settings(), "decision scope", args.scope_key, queries.get_scope)
    if args.json:
        print_json(found)
        return 0
    print(f"scope {found['scope_key']}")
    print("\nCURRENT")
    print_table(
        [
            {
                "kind": c["kind"],
                "generation": c["generation"],
                "as": c["generation_kind"],
                "candidate": c["candidate_id"],
                "accepted": c["accepted_at"],
            }
            for c in found["current"]
        ]
    )
    print("\nPENDING")
    print_table(
        [
            {
                "candidate": p["candidate_id"],
                "kind": p["kind"],
                "generation": p["generation"],
                "deadline": p["expires_at"],
                "status": p["outcome"],
            }
            for p in found["pending"]
        ]
    )
    print("\nRECENT DECISIONS")
    print_table(
        [
            {
                "decided": d["decided_at"],
                "candidate": d["candidate_id"],
                "kind": d["kind"],
                "generation": d["generation"],
                "outcome": d["outcome"],
                "reason": d["reason"],
                "current": d["current_generation"],
            }
            for d in found["recent"]
        ]
    )
    return 0
