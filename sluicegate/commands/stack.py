"""``sluicegate topics ensure``, ``sluicegate status`` and ``sluicegate serve``."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import orjson

from sluicegate.output import print_table
from sluicegate.supervisor import (
    DEFAULT_LIVENESS,
    LIVENESS_ENV,
    PROJECTORS_ENV,
    parse_liveness,
    parse_projectors,
    serve,
)
from streams.kafka.topics import ensure_topics
from streams.settings import load_settings


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    topics = subparsers.add_parser("topics", help="Kafka topic administration")
    tsub = topics.add_subparsers(dest="topics_command", metavar="ACTION", required=True)
    ensure = tsub.add_parser(
        "ensure",
        help="create every missing topic (idempotent); refuses a SLUICEGATE_PARTITIONS "
        "that differs from the existing keyed topics' count",
    )
    ensure.add_argument("--json", action="store_true")
    ensure.set_defaults(func=cmd_topics_ensure)

    serve_parser = subparsers.add_parser(
        "serve", help="every component in one supervised process tree (what `make run` starts)"
    )
    serve_parser.add_argument(
        "--only", action="append", default=None, help="run only this component (repeatable)"
    )
    serve_parser.add_argument(
        "--pid-file",
        type=Path,
        metavar="FILE",
        help=(
            "keep FILE up to date with one 'NAME PID' line for serve and each running component "
            "(removed on exit), so a script can signal one component by its pid"
        ),
    )
    serve_parser.add_argument(
        "--liveness",
        metavar="DURATION",
        default=None,
        help=(
            "kill (SIGKILL) and restart a component that sent no heartbeat for this long: "
            f"frozen or wedged (default ${LIVENESS_ENV} or {DEFAULT_LIVENESS}; off: never)"
        ),
    )
    serve_parser.add_argument(
        "--projectors",
        metavar="N",
        default=None,
        help=(
            "run N projectors, each a share of the partitions (projector:0/N ...; default "
            f"${PROJECTORS_ENV} or 1)"
        ),
    )
    serve_parser.set_defaults(func=cmd_serve)


def cmd_topics_ensure(args: argparse.Namespace) -> int:
    counts = ensure_topics(load_settings(), require_declared_count=True)
    if args.json:
        sys.stdout.write(orjson.dumps(counts).decode() + "\n")
    else:
        print_table([{"topic": name, "partitions": n} for name, n in sorted(counts.items())])
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    window = args.liveness or os.environ.get(LIVENESS_ENV, "").strip() or DEFAULT_LIVENESS
    projectors = args.projectors or os.environ.get(PROJECTORS_ENV, "").strip() or "1"
    return serve(
        load_settings(),
        only=args.only,
        pid_file=args.pid_file,
        liveness_s=parse_liveness(window),
        projectors=parse_projectors(projectors),
    )
