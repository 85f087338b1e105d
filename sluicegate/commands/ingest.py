"""``sluicegate ingest``: the webhook front door (``POST /v1/hooks/{subscription}``) and, on a
listener of its own, the read API."""

from __future__ import annotations

import argparse
import os

from streams.heartbeat import Heartbeat
from streams.settings import SettingsError, load_settings


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "ingest",
        help="run the webhook front door (and the read API on its own listener)",
        description=(
            "Serve POST /v1/hooks/{subscription}?env=paper|live, /healthz and /readyz on "
            "SLUICEGATE_HTTP, and the read API (GET /v1/runs/{id}, /v1/occurrences/{key}, "
            "/v1/stats, /metrics) on SLUICEGATE_READ_HTTP (127.0.0.1:8081 by default; behind "
            "SLUICEGATE_READ_TOKEN when set), until SIGTERM. Limits: SLUICEGATE_INGEST_* "
            "(see the README)."
        ),
    )
    parser.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="serve the webhook here instead of SLUICEGATE_HTTP",
    )
    parser.add_argument(
        "--read-http",
        metavar="HOST:PORT|off",
        help="serve the read API here instead of SLUICEGATE_READ_HTTP (off: not at all)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from consumers.ingest.settings import IngestSettings
    from sluicegate import bootstrap

    settings = load_settings()
    if args.http:
        try:
            settings = load_settings({**os.environ, "SLUICEGATE_HTTP": args.http})
        except SettingsError:
            raise SettingsError(
                f"--http {args.http!r} is not HOST:PORT (for example 127.0.0.1:8080)"
            ) from None
    environ = dict(os.environ)
    if args.read_http:
        environ["SLUICEGATE_READ_HTTP"] = args.read_http
    bootstrap.serve_ingest(
        settings, IngestSettings.from_env(environ), heartbeat=Heartbeat.from_environment()
    )
    return 0
