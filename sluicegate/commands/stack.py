"""``sluicegate topics ensure``, ``sluicegate status`` and ``sluicegate serve``."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import orjson
from confluent_kafka import KafkaException

from schemas.topics import TOPICS, TopicSpec
from sluicegate.commands.engine import health_address
from sluicegate.output import print_table
from sluicegate.restarts import DEFAULT_LIVENESS, LIVENESS_ENV, parse_liveness
from sluicegate.supervisor import HEALTH_ENV, PROJECTORS_ENV, parse_projectors, serve
from streams import logs
from streams.core.durations import format_duration
from streams.kafka.clients import admin_client
from streams.kafka.topic_policy import Shortfall, shortfalls
from streams.kafka.topics import ensure_topics, read_configs
from streams.settings import Settings, load_settings


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    topics = subparsers.add_parser("topics", help="Kafka topic administration")
    tsub = topics.add_subparsers(dest="topics_command", metavar="ACTION", required=True)
    ensure = tsub.add_parser(
        "ensure",
        help="create every missing topic (idempotent); refuses a SLUICEGATE_PARTITIONS "
        "that differs from the existing keyed topics' count and a compacted topic the broker "
        "may delete records from; reports topics that keep less than declared",
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
    serve_parser.add_argument(
        "--health",
        type=health_address,
        metavar="HOST:PORT",
        default=os.environ.get(HEALTH_ENV, "").strip() or None,
        help=(
            "serve the probes and /metrics of processor, gate, gateway, each projector and "
            f"worker on consecutive ports from PORT, in that order (default ${HEALTH_ENV}; "
            "none when unset)"
        ),
    )
    serve_parser.add_argument(
        "--log-format",
        choices=logs.FORMATS,
        default=None,
        help=(
            f"log lines of serve and of every component (default ${logs.ENV}; unset: JSON "
            "for ingest and the venue, text for the others)"
        ),
    )
    serve_parser.set_defaults(func=cmd_serve)


def cmd_topics_ensure(args: argparse.Namespace) -> int:
    settings = load_settings()
    counts = ensure_topics(settings, require_declared_count=True)
    if args.json:
        sys.stdout.write(orjson.dumps(counts).decode() + "\n")
    else:
        print_table([{"topic": name, "partitions": n} for name, n in sorted(counts.items())])
    for line in _shortfall_lines(settings):
        print(f"sluicegate topics ensure: {line}", file=sys.stderr)
    return 0


def _shortfall_lines(settings: Settings) -> list[str]:
    """One line per way a log topic keeps less than the catalogue declares (stderr: the
    standard output stays the table or the JSON it always was)."""
    logs = {settings.topic(spec): spec for spec in TOPICS if not spec.compacted}
    try:
        configs = read_configs(admin_client(settings), list(logs), 30.0)
    except (KafkaException, TimeoutError) as e:
        return [f"cannot read the topics' configuration ({e}); retention unchecked"]
    return [
        _explain(name, spec, found)
        for name, spec in logs.items()
        for found in shortfalls(spec, configs[name])
    ]


def _explain(name: str, spec: TopicSpec, found: Shortfall) -> str:
    declared = format_duration(spec.retention_ms)
    if found.setting == "cleanup.policy":
        return (
            f"{name} is compacted (declared: delete after {declared}): only the newest "
            "record of each key is kept, so `projections rebuild` and `replay` miss the others"
        )
    if found.setting == "retention.ms":
        kept = format_duration(int(found.actual))
        return (
            f"{name} keeps records for {kept} (declared: {declared}): a record its reader "
            f"has not read within {kept} is deleted unread, and `projections rebuild` and "
            f"`replay` see only the last {kept}"
        )
    return (
        f"{name} keeps at most {found.actual} bytes per partition (declared: no limit): "
        "older records are deleted, read or not"
    )


def cmd_serve(args: argparse.Namespace) -> int:
    window = args.liveness or os.environ.get(LIVENESS_ENV, "").strip() or DEFAULT_LIVENESS
    projectors = args.projectors or os.environ.get(PROJECTORS_ENV, "").strip() or "1"
    if args.log_format is not None:
        os.environ[logs.ENV] = args.log_format  # what every child inherits
    logs.configure("serve")
    return serve(
        load_settings(),
        only=args.only,
        pid_file=args.pid_file,
        liveness_s=parse_liveness(window),
        projectors=parse_projectors(projectors),
        health=args.health,
    )
