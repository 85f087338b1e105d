"""What the CLI prints: readable tables and pairs by default, JSON with ``--json``."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

import orjson


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


def print_json(value: object) -> None:
    """One line of JSON on stdout."""
    sys.stdout.write(orjson.dumps(value).decode("utf-8") + "\n")


def print_rows(rows: list[dict[str, object]], as_json: bool) -> None:
    """``rows`` as one JSON array (``--json``) or as a table."""
    if as_json:
        print_json(rows)
    else:
        print_table(rows)


def print_pairs(pairs: list[tuple[str, object]]) -> None:
    """``key  value`` lines, keys aligned; ``-`` for an empty value."""
    width = max(len(k) for k, _ in pairs)
    for key, value in pairs:
        shown = "-" if value is None or value in ("", []) else value
        if isinstance(shown, list):
            shown = ", ".join(str(v) for v in shown)
        print(f"{key.ljust(width)}  {shown}")


def page_line(
    page: Mapping[str, Any], listed: int, total: int, tally: Mapping[str, int] | None = None
) -> str:
    """Where a page of a list stands: ``101-200 of 200,001: 1 admitted, 200,000
    deduplicated; --from 200 for more`` (``page`` as :func:`projections.pages.page` gives it,
    ``tally`` a count per kind)."""
    start = page["from"]
    line = (f"{start + 1:,}-{start + listed:,}" if listed else "none") + f" of {total:,}"
    if tally:
        line += ": " + ", ".join(f"{n:,} {kind}" for kind, n in tally.items())
    return line if page["next"] is None else f"{line}; --from {page['next']} for more"


def clip(value: object, width: int = 60) -> object:
    """A text value on one line, cut to ``width`` characters (other values as they are)."""
    if isinstance(value, str):
        value = value.replace("\n", " ")
        return value if len(value) <= width else value[: width - 3] + "..."
    return value


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)
