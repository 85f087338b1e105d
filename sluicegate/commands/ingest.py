"""``sluicegate ingest``: the webhook front door (``POST /v1/hooks/{subscription}``)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from sluicegate.config import SettingsError, load_settings


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "ingest",
        help="run the webhook front door",
        description=(
            "Serve POST /v1/hooks/{subscription}?env=paper|live, /healthz and /readyz on "
            "SLUICEGATE_HTTP until SIGTERM. Limits: SLUICEGATE_INGEST_* (see docs/ingest.md)."
        ),
    )
    parser.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="listen here instead of SLUICEGATE_HTTP",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # Imported here: `sluicegate --help` must not load aiohttp and librdkafka.
    from consumers.ingest.server import run_ingest

    settings = load_settings()
    if args.http:
        try:
            settings = load_settings({**os.environ, "SLUICEGATE_HTTP": args.http})
        except SettingsError:
            raise SettingsError(
                f"--http {args.http!r} is not HOST:PORT (for example 127.0.0.1:8080)"
            ) from None
    run_ingest(settings)
    return 0
