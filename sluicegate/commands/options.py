"""Option types that several commands share."""

from __future__ import annotations

import argparse

from projections import pages

MAX_WAIT_S = 3600.0


def wait_seconds(text: str) -> float:
    """A ``--wait``: seconds from 0 (do not wait) to an hour, finite. ``float`` alone took
    ``nan`` (no wait, reported as "nan s"), ``inf`` (forever) and negatives."""
    return _seconds(text, above_zero=False)


def positive_wait_seconds(text: str) -> float:
    """A ``--wait`` that must wait at all: above 0, at most an hour."""
    return _seconds(text, above_zero=True)


def _seconds(text: str, *, above_zero: bool) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    in_range = 0 < seconds <= MAX_WAIT_S if above_zero else 0 <= seconds <= MAX_WAIT_S
    if not in_range:
        lowest = "above 0" if above_zero else "0 or more"
        raise argparse.ArgumentTypeError(
            f"not a number of seconds ({lowest}, at most {MAX_WAIT_S:g}): {text!r}"
        )
    return seconds


def add_page_options(parser: argparse.ArgumentParser, *, what: str, default: int) -> None:
    """``--from N`` (``args.start``) and ``--limit N`` (``args.limit``) of a paged list."""
    parser.add_argument(
        "--from",
        dest="start",
        type=_page_from,
        default=0,
        metavar="N",
        help=f"list {what} from position N (0, the first, by default)",
    )
    parser.add_argument(
        "--limit",
        type=_page_limit,
        default=default,
        metavar="N",
        help=f"list at most N {what} ({default} by default, at most {pages.PAGE_MAX})",
    )


def _page_from(text: str) -> int:
    value = pages.parse_from(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"not {pages.FROM_ACCEPTS}: {text!r}")
    return value


def _page_limit(text: str) -> int:
    value = pages.parse_limit(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"not {pages.LIMIT_ACCEPTS}: {text!r}")
    return value
