"""``sluicegate projections prune [--dry-run] [--batch N]`` and the projector's
``--prune-every``."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import TYPE_CHECKING

from projections.share import Share
from streams.core.durations import parse_duration
from streams.core.errors import InvalidValue
from streams.settings import Settings, load_settings
from streams.text import parse_whole

if TYPE_CHECKING:
    from projections.prune_schedule import PruneSchedule

PRUNE_EVERY_ENV = "SLUICEGATE_PRUNE_EVERY"
PRUNE_KEEP_ENV = "SLUICEGATE_PRUNE_KEEP"


def add_prune(psub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    prune = psub.add_parser(
        "prune",
        help="delete the occurrences the engine has forgotten and the topics no longer hold, "
        "with every row built from them (counters, workflows, scopes, dead letters stay)",
    )
    prune.add_argument(
        "--dry-run",
        action="store_true",
        help="count what would be deleted, table by table, and delete nothing",
    )
    add_keep_option(prune, "--keep", "keep")
    prune.add_argument(
        "--batch",
        type=_batch,
        default=None,
        metavar="N",
        help="evicted occurrences examined per transaction, each holding the projector's "
        "writers' lock (default 500)",
    )
    prune.set_defaults(func=cmd_prune)


BATCH_ALLOWED = 100_000


def _batch(text: str) -> int:
    value = parse_whole(text.strip(), BATCH_ALLOWED)
    if not value:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a whole number from 1 to {BATCH_ALLOWED}"
        )
    return value


def cmd_prune(args: argparse.Namespace) -> int:
    from projections.prune import BATCH, prune

    report = prune(
        load_settings(), dry_run=args.dry_run, batch=args.batch or BATCH, keep_ms=args.keep
    )
    for line in report.table_lines():
        print(line)
    print(report.describe(), file=sys.stderr)
    return 0


def add_keep_option(parser: argparse.ArgumentParser, flag: str, dest: str) -> None:
    parser.add_argument(
        flag,
        dest=dest,
        type=_keep,
        default=os.environ.get(PRUNE_KEEP_ENV) or "0s",  # argparse parses it with _keep
        metavar="DURATION",
        help="keep an occurrence with a record younger than this (an audit horizon, e.g. "
        f"400d; default ${PRUNE_KEEP_ENV}, else 0s: as soon as the rules allow)",
    )


def _keep(text: str) -> int:
    """Milliseconds an occurrence is kept at least."""
    try:
        return parse_duration(text)
    except InvalidValue as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_prune_every_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--prune-every",
        type=_every,
        default=os.environ.get(PRUNE_EVERY_ENV) or "off",  # argparse parses it with _every
        metavar="DURATION",
        help="run `projections prune` on a thread of the projector this often (e.g. 6h; at "
        "least 1s), the first one interval after the start; off by default "
        f"(${PRUNE_EVERY_ENV}). Only the projector of share 0 prunes",
    )
    add_keep_option(parser, "--prune-keep", "prune_keep")


def _every(text: str) -> float | None:
    """Seconds between prunes, or ``None`` for ``off``."""
    if text.strip() == "off":
        return None
    try:
        ms = parse_duration(text)
    except InvalidValue as e:
        raise argparse.ArgumentTypeError(f"{e} (or off)") from None
    if ms < 1000:
        raise argparse.ArgumentTypeError(f"{text!r} is under 1s (or off)")
    return ms / 1000


def prune_schedule(
    settings: Settings, every_s: float | None, share: Share | None, keep_ms: int = 0
) -> PruneSchedule | None:
    """The started schedule of a projector told to prune, unless it projects a share other
    than the first (one projector of a deployment prunes)."""
    from projections.prune_schedule import PruneSchedule

    if every_s is None:
        return None
    log = logging.getLogger("sluicegate.projector")
    if share is not None and share.index != 0:
        log.info("not pruning: the projector of share 0/%d does", share.count)
        return None
    schedule = PruneSchedule(settings, every_s, keep_ms=keep_ms)
    schedule.start()
    log.info("pruning the read model every %g s, the first in %g s", every_s, every_s)
    return schedule
