"""``sluicegate venue``: the paper venue (a stand-in exchange with durable state)."""

from __future__ import annotations

import argparse

from consumers.paper_venue import cli
from consumers.paper_venue.errors import PaperVenueError
from sluicegate.errors import SluicegateError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "venue",
        help="run the paper venue (Binance Spot subset, fault injection)",
        description=cli.DESCRIPTION,
    )
    cli.add_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        return cli.run(args)
    except PaperVenueError as e:
        raise SluicegateError(str(e)) from None
