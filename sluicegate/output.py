"""Readable tables for the CLI (``--json`` prints machine output instead)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TextIO


def print_table(rows: Sequence[dict[str, object]], out: TextIO | None = None) -> None:
    """Columns from the first row's keys, left-aligned; ``(none)`` for an empty list."""
    out = out or sys.stdout
    if not rows:
        print("(none)", file=out)
        return
    columns = list(rows[0])
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    print(
        "  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip(),
        file=out,
    )
    for r in cells:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip(), file=out)


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)
