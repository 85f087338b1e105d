"""``sluicegate replay``: topics decoded to JSON lines or CSV, for analysts (reads Kafka)."""

from __future__ import annotations

import argparse
import os
import sys

from projections.progress import Progress
from streams.adapters.replay import (
    Gap,
    ReplayFilter,
    Writer,
    parse_time,
    read_topics,
    resolve_topics,
)
from streams.settings import load_settings


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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

    gaps: list[Gap] = []

    def gap(found: Gap) -> None:
        gaps.append(found)
        print(f"replay: {found.describe()}", file=sys.stderr)

    written = undecodable = 0
    try:
        for item in read_topics(settings, topics, filt.since_ms, total, bar.advance, on_gap=gap):
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
    if gaps:
        lost = sum(g.end - g.first for g in gaps)
        partitions = len({(g.topic, g.partition) for g in gaps})
        print(
            f"replay: {lost} offset(s) of {partitions} partition(s) left retention while replay "
            "read them (see above): the output lacks whatever records they held",
            file=sys.stderr,
        )
    return 0
