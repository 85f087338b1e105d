"""The one format every benchmark section writes, and the statistics every figure uses.

Every figure is the median of at least three runs, shown with its min and max
(:func:`spread`); ratios are taken between medians measured side by side in one run.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.machine import Machine, machine_facts

Cell = str | int | float


@dataclass(frozen=True)
class Spread:
    median: float
    low: float
    high: float
    runs: int

    def shown(self, digits: int = 0, unit: str = "") -> str:
        """``12,300 (11,900 to 12,800)`` with ``digits`` decimals."""
        f = f"{{:,.{digits}f}}"
        return f"{f.format(self.median)}{unit} ({f.format(self.low)} to {f.format(self.high)})"


def spread(values: list[float]) -> Spread:
    if not values:
        raise ValueError("a figure needs at least one run")
    return Spread(statistics.median(values), min(values), max(values), len(values))


def percentile(sorted_values: list[float], p: float) -> float:
    """Nearest-rank percentile ``p`` (0 to 100) of already sorted values."""
    if not sorted_values:
        raise ValueError("no values")
    rank = max(1, min(len(sorted_values), round(p / 100 * len(sorted_values) + 0.5)))
    return sorted_values[rank - 1]


@dataclass(frozen=True)
class Table:
    title: str
    columns: list[str]
    rows: list[list[Cell]]


@dataclass(frozen=True)
class Series:
    """One line or bar group of a plot: ``kind`` is ``"bar"`` or ``"line"``."""

    plot: str
    label: str
    x: list[Cell]
    y: list[float]
    kind: str = "bar"
    xlabel: str = ""
    ylabel: str = ""


@dataclass(frozen=True)
class Section:
    """One section of ``docs/benchmarks.md``; ``order`` places it (1 admission ... 5 recovery)."""

    order: int
    title: str
    intro: str
    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    series: list[Series] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    measured: str = ""
    """When its timed runs were written (``YYYY-MM-DD HH:MM UTC``); :func:`write` stamps it."""
    machine: Machine | None = None
    """What it was measured on; :func:`write` stamps it (``None``: a file from before)."""


@dataclass(frozen=True)
class Target:
    """A target of the issue and whether this run met it (``by`` says by how much)."""

    name: str
    wanted: str
    measured: str
    met: bool
    by: str = ""


def write(section: Section, path: Path, machine: Machine | None = None) -> None:
    """Write ``section`` to ``path``, stamped with the time now and ``machine`` (default:
    this machine's facts) unless it has them."""
    if not section.measured:
        section = dataclasses.replace(section, measured=utc_minute(time.time()))
    if section.machine is None:
        section = dataclasses.replace(section, machine=machine or machine_facts())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(section), indent=2) + "\n")


def replace_notes(path: Path, prefix: str, notes: list[str]) -> None:
    """Replace the notes of the section in ``path`` that start with ``prefix`` by ``notes``
    (a profile run after the timed ones). The section keeps its ``measured`` time: the
    page's "Measured" line is when the timed runs were written, which this does not change."""
    done = read(path)
    kept = [n for n in done.notes if not n.startswith(prefix)]
    write(dataclasses.replace(done, notes=kept + notes), path)


def utc_minute(epoch_s: float) -> str:
    return datetime.datetime.fromtimestamp(epoch_s, datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


def read(path: Path) -> Section:
    """The section in ``path``; one written before sections carried their ``measured`` time
    is taken as measured when the file was last written."""
    raw: dict[str, Any] = json.loads(path.read_text())
    return Section(
        order=raw["order"],
        title=raw["title"],
        intro=raw["intro"],
        tables=[Table(**t) for t in raw.get("tables", [])],
        notes=list(raw.get("notes", [])),
        series=[Series(**s) for s in raw.get("series", [])],
        targets=[Target(**t) for t in raw.get("targets", [])],
        measured=raw.get("measured") or utc_minute(path.stat().st_mtime),
        machine=Machine(**raw["machine"]) if raw.get("machine") else None,
    )
