"""The paper venue's command line: ``sluicegate venue``, ``python -m consumers.paper_venue``.

Flags win over environment variables (``SLUICEGATE_VENUE_HTTP``, ``SLUICEGATE_VENUE_STATE_DIR``,
``SLUICEGATE_VENUE_CONFIG``), which win over the defaults (127.0.0.1:8090, ``var/venue``, the
built-in configuration).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

from consumers.paper_venue.config import DEFAULT_HTTP, DEFAULT_STATE_DIR
from consumers.paper_venue.errors import PaperVenueError

DESCRIPTION = (
    "Run the paper venue: a Binance-Spot-compatible REST subset (/api/v3), a native JSON API "
    "(/paper/v1/account) and an admin API for drills (/paper/v1), with durable state."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The venue's options, for any parser that runs it."""
    parser.add_argument(
        "--http", metavar="HOST:PORT", help=f"listen address (default {DEFAULT_HTTP})"
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        metavar="DIR",
        help=f"durable state directory (default {DEFAULT_STATE_DIR})",
    )
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="TOML: symbols, accounts, commissions, admin token, faults",
    )


def run(
    args: argparse.Namespace,
    beside: Callable[[asyncio.Event], Coroutine[Any, Any, None]] | None = None,
) -> int:
    """Run the venue until SIGTERM/SIGINT (raises :class:`PaperVenueError` on bad settings);
    ``beside(stop)`` runs on its event loop meanwhile (:func:`~.server.run_venue`)."""
    from consumers.paper_venue.server import run_venue  # aiohttp only when actually running

    http = args.http or os.environ.get("SLUICEGATE_VENUE_HTTP") or DEFAULT_HTTP
    state_dir = args.state_dir or os.environ.get("SLUICEGATE_VENUE_STATE_DIR") or DEFAULT_STATE_DIR
    config = args.config or os.environ.get("SLUICEGATE_VENUE_CONFIG")
    run_venue(http, Path(state_dir), Path(config) if config else None, beside)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m consumers.paper_venue", description=DESCRIPTION
    )
    add_arguments(parser)
    try:
        return run(parser.parse_args(argv))
    except PaperVenueError as e:
        print(f"paper venue: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
