"""The ``sluicegate`` console script.

Each command group has its module under ``sluicegate/commands/``: it exposes
``register(subparsers)`` and sets ``func(args) -> int`` on the parsers it adds; the components
they run are built by :mod:`sluicegate.bootstrap`. An error derived from one of the packages'
error roots (:data:`ERROR_ROOTS`) is printed to stderr as ``sluicegate COMMAND: message``
with exit code 1: those messages are written for operators and say what to do.

Every argument that is a plain string (an id, a key, a reason, a name: no ``type`` of its own
and stored as given) must be UTF-8 text without NUL (:class:`TextArgumentParser`): bytes that
are not UTF-8 would otherwise reach Kafka, librdkafka or PostgreSQL and fail there with a
traceback. They are a usage error (exit code 2) naming the argument and the byte. Arguments
that name a file (``type=Path``) may hold any bytes, as Linux file names may.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import Any

from consumers.errors import ConsumersError
from projections.errors import ProjectionError
from schemas.errors import SchemaError
from sluicegate import native
from sluicegate.commands import (
    gate,
    gateway,
    holds,
    ingest,
    occurrences,
    processor,
    projections,
    publish,
    replay,
    runs,
    scopes,
    stack,
    stats,
    venue,
    worker,
    workflows,
)
from sluicegate.errors import SluicegateError
from streams import heartbeat, logs
from streams.errors import StreamsError
from streams.text import not_text

# Order is the order of `sluicegate --help`.
COMMANDS = (
    stack,
    workflows,
    publish,
    processor,
    gate,
    ingest,
    worker,
    runs,
    occurrences,
    scopes,
    stats,
    replay,
    projections,
    venue,
    gateway,
    holds,
)

ERROR_ROOTS: tuple[type[Exception], ...] = (
    SluicegateError,
    SchemaError,
    StreamsError,
    ProjectionError,
    ConsumersError,
)
"""The error root of every package: ``sluicegate``, ``schemas``, ``streams`` (settings, Kafka,
the core, the engine, apps and adapters), ``projections`` and ``consumers`` (the paper venue's
own root is translated by its command)."""


def text(value: str) -> str:
    """``value`` if it is UTF-8 text without NUL; else the argument's usage error."""
    problem = not_text(value)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{problem}; ids, keys and names are UTF-8 text")
    return value


class TextArgumentParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose plain string arguments are :func:`text` (the sub-parsers
    it makes are of this class too)."""

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        if kwargs.get("action", "store") in ("store", "append") and "type" not in kwargs:
            kwargs["type"] = text
        return super().add_argument(*args, **kwargs)


def printable(message: str) -> str:
    """``message`` with what cannot be written as UTF-8 (a file name's undecodable bytes)
    escaped, as Python's own stderr would show it."""
    return message.encode("utf-8", "backslashreplace").decode("utf-8")


def build_parser() -> argparse.ArgumentParser:
    parser = TextArgumentParser(
        prog="sluicegate",
        description="Exactly-once run admission, deadlines and an order journal on Kafka.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    if not heartbeat.stop_with_supervisor():
        print(
            f"sluicegate {args.command}: the sluicegate serve that started it has exited; "
            "not starting",
            file=sys.stderr,
        )
        return 1
    try:
        native.check()  # never decide with a compiled core that does not match its source
        return int(func(args))
    except KeyboardInterrupt:
        return 130
    except ERROR_ROOTS as e:
        if logs.configured() == logs.JSON:  # a component's last line is one of its log lines
            logging.getLogger("sluicegate").error("%s", e)
        else:
            print(printable(f"sluicegate {args.command}: {e}"), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
