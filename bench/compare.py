"""What a benchmark run changed: each plotted figure against the results it replaced.

``make bench`` overwrites ``docs/benchmarks/<section>.json``. Before it does, :mod:`bench.run`
reads what is there; afterwards it prints every figure both runs plotted (a bar's median, a
latency line's point) with its change, the ones worse by more than :data:`FLAGGED` first,
and writes the same lines to ``var/bench/changes.txt``. A figure that fell by half shows up
on the terminal of whoever ran the benchmark, not only in a diff of the page.

A change is a lead, not a verdict: this machine is shared, and a whole run can be slower
than the one before (on 2026-12-07 the same commit admitted 8,796 to 11,220 deliveries/s
in runs an hour apart). The limit and the bare round trip, measured in the same run, show
how much the machine moved; what tells the code from the machine is the commit the old
results came from, run beside this one on the same broker (a worktree, one section, a
few alternated runs). That is how a fall of one instance from about 10,700 to 6,300
deliveries/s was told from the machine and bisected to one commit on 2026-12-07.

Which direction is better comes from the series' unit: rates (``.../s``) up, durations
(``ms``, ``seconds``) down; series in other units (the projector's lag over time) and points
whose x label is not unique within their series are left out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bench.results import Section, Series

FLAGGED = 0.15
"""A figure this much worse than before (as a share of the old value) is listed first."""

_LOWER_IS_BETTER = ("ms", "seconds")


@dataclass(frozen=True)
class Change:
    """One plotted figure in the run before and in this one."""

    section: str
    figure: str
    unit: str
    before: float
    after: float
    higher_is_better: bool

    @property
    def ratio(self) -> float:
        """``after / before``; ``inf`` when the figure was 0 before and is not now."""
        if self.before == 0:
            return 1.0 if self.after == 0 else float("inf")
        return self.after / self.before

    @property
    def worse_by(self) -> float:
        """How much worse this run is, as a share of the old value (negative: better)."""
        change = self.ratio - 1.0
        return -change if self.higher_is_better else change

    @property
    def flagged(self) -> bool:
        return self.worse_by > FLAGGED

    def line(self) -> str:
        verdict = "worse" if self.worse_by > 0 else "better"
        moved = "from 0" if math.isinf(self.ratio) else f"{abs(self.ratio - 1.0):.0%} {verdict}"
        mark = "!! " if self.flagged else "   "
        return (
            f"{mark}{self.section}: {self.figure}: {_number(self.after)} {self.unit}, "
            f"was {_number(self.before)} ({moved})"
        )


def _number(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.2f}"


def _direction(series: Series) -> bool | None:
    """``True`` if higher is better, ``False`` if lower is, ``None`` if not compared."""
    unit = series.ylabel.strip()
    if unit.endswith("/s"):
        return True
    if unit in _LOWER_IS_BETTER:
        return False
    return None


def _points(section: Section) -> dict[tuple[str, str, str], tuple[float, Series, bool]]:
    """Every comparable point of a section: (plot, label, x) to its value, its series and
    whether higher is better."""
    points: dict[tuple[str, str, str], tuple[float, Series, bool]] = {}
    for series in section.series:
        labels = [str(x) for x in series.x]
        higher_is_better = _direction(series)
        if higher_is_better is None or len(set(labels)) != len(labels):
            continue
        for x, y in zip(labels, series.y, strict=False):
            points[(series.plot, series.label, x)] = (float(y), series, higher_is_better)
    return points


def changes(before: Section, after: Section) -> list[Change]:
    """The figures both runs of one section plotted, in this run's order; nothing if
    ``after`` is the same run as ``before`` (a section that did not run again)."""
    if before.measured == after.measured:
        return []
    old = _points(before)
    return [
        Change(
            section=after.title,
            figure=f"{label}: {x}" if series.kind == "bar" else f"{label} at {x}",
            unit=series.ylabel.strip(),
            before=old[(plot, label, x)][0],
            after=value,
            higher_is_better=higher_is_better,
        )
        for (plot, label, x), (value, series, higher_is_better) in _points(after).items()
        if (plot, label, x) in old
    ]


def report(found: Iterable[Change], before_measured: Sequence[str] = ()) -> list[str]:
    """The lines to print: flagged changes first (worst first), then the rest in order."""
    listed = list(found)
    if not listed:
        return ["bench: no figure to compare with the results this run replaced"]
    flagged = sorted((c for c in listed if c.flagged), key=lambda c: -c.worse_by)
    head = "bench: against the results this run replaced"
    if before_measured:
        head += f" (measured {', '.join(before_measured)})"
    lines = [head + f"; !! marks a figure more than {FLAGGED:.0%} worse:"]
    lines += [c.line() for c in flagged]
    lines += [c.line() for c in listed if not c.flagged]
    if flagged:
        lines.append(
            "bench: a flagged figure is a lead: the limit and the bare round trip show how much "
            "the machine moved; to tell the code from the machine, run the commit the old "
            "results came from beside this one (a worktree, BENCH_SECTIONS, a few alternated runs)"
        )
    return lines
