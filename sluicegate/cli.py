"""The ``sluicegate`` console script.

Each area of the product registers its subcommands from its own module under
``sluicegate/commands/``: a module exposes ``register(subparsers)`` and sets
``func(args) -> int`` on the parsers it adds. Errors derived from :class:`SluicegateError`
(and every package's own error root) are printed to stderr with a non-zero exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from sluicegate.errors import SluicegateError

# Order is the order of `sluicegate --help`.
COMMAND_MODULES: tuple[str, ...] = (
    "sluicegate.commands.stack",
    "sluicegate.commands.admission",
    "sluicegate.commands.ingest",
    "sluicegate.commands.worker",
    "sluicegate.commands.read",
    "sluicegate.commands.projections",
    "sluicegate.commands.venue",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sluicegate",
        description="Exactly-once run admission, deadlines and an order journal on Kafka.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    try:
        return int(func(args))
    except KeyboardInterrupt:
        return 130
    except Exception as e:
        if _is_product_error(e):
            print(f"sluicegate {args.command}: {e}", file=sys.stderr)
            return 1
        raise


def _is_product_error(e: BaseException) -> bool:
    """Every package's error root counts: their messages are written for operators."""
    roots: list[type[BaseException]] = [SluicegateError]
    for module, root in (
        ("schemas.errors", "SchemaError"),
        ("streams.errors", "StreamsError"),
        ("projections.errors", "ProjectionError"),
        ("consumers.errors", "ConsumersError"),
    ):
        try:
            roots.append(getattr(importlib.import_module(module), root))
        except (ImportError, AttributeError):
            continue
    return isinstance(e, tuple(roots))


if __name__ == "__main__":
    sys.exit(main())
