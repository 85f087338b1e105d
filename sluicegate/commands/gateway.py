"""``sluicegate gateway`` (one execution gateway instance) and ``sluicegate recover``.

``recover`` never acts on a run itself: it asks the run's owning gateway (a ``RecoverRun`` on
``actions``) and reads the recovery receipt back from the projection.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
import uuid
from typing import Any

from consumers.gateway.operator import send_commands
from consumers.gateway.settings import GatewaySettings
from schemas.commands import RecoverRun
from sluicegate.commands import engine
from sluicegate.commands.options import wait_seconds
from sluicegate.output import print_json, print_table
from streams.clock import wall_clock_ms
from streams.engine import failpoints
from streams.settings import Settings, load_settings


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    gateway = subparsers.add_parser(
        "gateway", help="run one execution gateway instance (the action journal and the venue)"
    )
    engine.add_instance_id(gateway, default="gateway-1", env_var="SLUICEGATE_INSTANCE_ID")
    gateway.add_argument(
        "--journal-restored",
        action="store_true",
        help="the gateway's journal (gateway-changelog) was restored from an older point: "
        "look every action up before sending anything; keep it on every start until the "
        "gateway logs that every run has been recovered with it",
    )
    gateway.add_argument(
        "--commit-interval-ms",
        type=int,
        default=20,
        help="longest wait for input before a batch (default 20; answers and due steps go at once)",
    )
    engine.add_health_option(gateway)
    gateway.set_defaults(func=cmd_gateway)

    recover = subparsers.add_parser(
        "recover",
        help="ask the owning gateway to recover a run (default: every run with work left)",
    )
    recover.add_argument("--run", metavar="RUN_ID", help="only this run")
    recover.add_argument("--reason", default="operator request", help="kept with the recovery")
    recover.add_argument(
        "--journal-restored",
        action="store_true",
        help="the journal was restored from an older point: nothing unsent may be sent "
        "before the venue was asked",
    )
    recover.add_argument(
        "--wait", type=wait_seconds, default=15.0, metavar="SECONDS", help="wait for the receipts"
    )
    recover.add_argument("--json", action="store_true")
    recover.set_defaults(func=cmd_recover)


def cmd_gateway(args: argparse.Namespace) -> int:
    from sluicegate import bootstrap

    settings = engine.start_logging("gateway")
    gateway = GatewaySettings.from_env()
    instance_id = engine.instance_id(args, default="gateway-1", env_var="SLUICEGATE_INSTANCE_ID")
    failpoints.from_env()  # a malformed SLUICEGATE_FAILPOINTS stops here, not later
    processor = bootstrap.gateway_processor(
        settings,
        gateway,
        instance_id=instance_id,
        commit_interval_ms=args.commit_interval_ms,
        journal_restored=args.journal_restored,
    )

    log = logging.getLogger("sluicegate.gateway")
    log.info(
        "gateway %s: venue %s at %s, quiet period %d ms, recv window %d ms%s",
        instance_id,
        gateway.venue,
        gateway.venue_url,
        gateway.policy.quiet_period_ms,
        gateway.policy.recv_window_ms,
        ", journal restored from an older point" if args.journal_restored else "",
    )

    def summary(seconds: float) -> str:
        effects = processor.effects
        return (
            f"{engine.counts(processor.stats, seconds)} answers={processor.stats.answers} "
            f"effects={effects.stats if effects is not None else None}"
        )

    return engine.run_until_signalled(processor, log, summary, args.health)


def operator_name() -> str:
    """Who asks (kept with the request): ``$USER``, else ``operator``."""
    return os.environ.get("USER") or "operator"


def cmd_recover(args: argparse.Namespace) -> int:
    from projections import queries
    from projections.queries import journal as journal_queries

    settings = load_settings()
    if args.run:
        with queries.reader(settings) as (conn, schema):
            evicted = journal_queries.evicted_at(conn, schema, args.run)
        if evicted is not None:
            print(
                f"{args.run} finished and its journal left the gateway at "
                f"{queries.iso(evicted)} (SLUICEGATE_GATEWAY_RETENTION): nothing to recover; "
                f"see `sluicegate runs timeline {args.run}`",
                file=sys.stderr,
            )
            return 0
        runs = [args.run]
    else:
        with queries.reader(settings) as (conn, schema):
            runs = journal_queries.runs_needing_recovery(conn, schema)
        if not runs:
            print("no run has work left; nothing to recover", file=sys.stderr)
            return 0
    requested_at = wall_clock_ms()
    origin = "backup" if args.journal_restored else "live"
    send_commands(
        settings,
        [
            RecoverRun(uuid.uuid4().hex, run, operator_name(), args.reason, requested_at, origin)
            for run in runs
        ],
    )
    if args.wait <= 0:
        print(f"recovery requested for {len(runs)} run(s)", file=sys.stderr)
        return 0
    found = wait_for(
        settings,
        args.wait,
        lambda c, s: {
            r: journal_queries.recovery_receipt_since(c, s, r, requested_at) for r in runs
        },
    )
    rows = [
        {
            "run": run,
            "recovery": receipt["recovery_id"] if receipt else None,
            "owner": receipt["owner_instance"] if receipt else None,
            "restored": receipt["checkpoint_id"] if receipt else None,
            "consulted": len(receipt["records_consulted"]) if receipt else None,
            "advanced_to": receipt["checkpoint_advanced_to"] if receipt else None,
            "next": receipt["next_permitted"] if receipt else None,
            "held": receipt["held"] if receipt else None,
        }
        for run, receipt in found.items()
    ]
    if args.json:
        print_json({"runs": {run: receipt for run, receipt in found.items()}})
    else:
        print_table(rows)
    missing = [run for run, receipt in found.items() if receipt is None]
    if missing:
        print(
            f"no recovery receipt within {args.wait:g} s for {', '.join(missing)}: the owner "
            "may still be reconciling (a lookup waits out the venue's quiet period); see "
            "`sluicegate runs timeline RUN_ID`, and is `sluicegate gateway` running?",
            file=sys.stderr,
        )
        return 1
    return 0


def wait_for(settings: Settings, wait_s: float, probe: Any) -> dict[str, Any]:
    """Poll ``probe(conn, schema) -> {name: row | None}`` until every row is there."""
    from projections import queries

    deadline = time.monotonic() + wait_s
    with queries.reader(settings) as (conn, schema):
        while True:
            found: dict[str, Any] = probe(conn, schema)
            if all(v is not None for v in found.values()) or time.monotonic() >= deadline:
                return found
            time.sleep(0.2)
