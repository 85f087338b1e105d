"""Option types that several commands share."""

from __future__ import annotations

import argparse

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
