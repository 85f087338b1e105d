"""``sluicegate stats``: the counts of the public surface, read from the projection."""

from __future__ import annotations

import argparse

from sluicegate.output import print_json
from streams.settings import load_settings


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    stats = subparsers.add_parser("stats", help="the counts (deliveries, runs, duplicates, ...)")
    stats.add_argument("--json", action="store_true")
    stats.set_defaults(func=cmd_stats)


def cmd_stats(args: argparse.Namespace) -> int:
    from projections import queries

    settings = load_settings()
    with queries.reader(settings) as (conn, schema):
        stats = queries.get_stats(conn, schema)
    if args.json:
        print_json(stats)
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
