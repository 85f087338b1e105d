"""``sluicegate venue``: the paper venue (a stand-in exchange with durable state)."""

from __future__ import annotations

import argparse
import os

from consumers.paper_venue import cli
from consumers.paper_venue.errors import PaperVenueError
from sluicegate.errors import SluicegateError
from streams import logs
from streams.heartbeat import Heartbeat
from streams.settings import check_text_variables


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "venue",
        help="run the paper venue (Binance Spot subset, fault injection)",
        description=cli.DESCRIPTION,
    )
    cli.add_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # The venue reads its own variables (SLUICEGATE_VENUE_*), not load_settings'.
    check_text_variables(os.environ)
    logs.configure("venue", default=logs.JSON)  # before the venue's own (which it then keeps)
    heart = Heartbeat.from_environment()  # under `sluicegate serve`: beat from the venue's loop
    try:
        return cli.run(args, None if heart is None else heart.beat_async)
    except PaperVenueError as e:
        raise SluicegateError(str(e)) from None
