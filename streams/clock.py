"""The wall clock every shell reads: UTC epoch milliseconds.

The pure core never reads a clock; the shells (the engine, ingest, the commands) pass this
value in as ``now``. Tests pass a controllable clock instead.
"""

from __future__ import annotations

import time


def wall_clock_ms() -> int:
    """Now, as UTC epoch milliseconds."""
    return time.time_ns() // 1_000_000
