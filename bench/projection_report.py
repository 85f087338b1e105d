"""Section 4's report, from the measurements alone (pure: no Kafka, no PostgreSQL).

:func:`section` turns the runs of :mod:`bench.projection` into a :class:`bench.results.Section`:
the table of rates (median of the runs, min to max), the targets of issue 12 and the notes;
:func:`top_frames` condenses a py-spy ``--format raw`` profile to the frames a note quotes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from bench.results import Section, Series, Table, Target, spread

ORDER = 4
PROCESSOR_TARGET_DELIVERIES = 10_000
"""Deliveries/s one processor instance is to admit (issue 12)."""


@dataclass(frozen=True)
class Run:
    """One run's figures, all on the same history: events and seconds per contender.

    ``counts_ok`` is False when any contender's table counts differed from the model's; such
    a run's speeds are not reported as if they were right.
    """

    events: int
    live_s: float
    rebuild_s: float
    copy_s: float
    counts_ok: bool = True
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class Setting:
    """What every run shares: the history and the live projector's batch size."""

    events: int
    deliveries: int
    rows: int
    events_per_delivery: float
    batch_size: int
    profiles: dict[str, list[str]] = field(default_factory=dict)


def _rate(events: int, seconds: float) -> float:
    return events / seconds if seconds > 0 else 0.0


def section(setting: Setting, runs: Sequence[Run]) -> Section:
    """The section of ``docs/benchmarks.md`` for these runs (failed runs are named, not used)."""
    good = [r for r in runs if r.counts_ok]
    notes = [
        f"Run {i + 1} failed its count check ({'; '.join(r.problems)}): its speeds are left out."
        for i, r in enumerate(runs)
        if not r.counts_ok
    ]
    intro = (
        f"A history of {setting.events:,} records ({setting.deliveries:,} deliveries, "
        f"{setting.rows:,} table rows) made by the real admission and gate cores, backlog on "
        "the topics (6 partitions each), projected into PostgreSQL three ways side by side in "
        "each run: the live projector catching up (batches of "
        f"{setting.batch_size:,}), `projections rebuild` (fresh schema, indexes built after the "
        "load, swap) and a bare `COPY` of the rebuilt rows, as text, into freshly migrated "
        "tables (same indexes) in one transaction. Every run's table counts are checked "
        "against the pure model of the same history."
    )
    if not good:
        return Section(ORDER, "Projection", intro, notes=notes or ["No run completed."])
    live = spread([_rate(r.events, r.live_s) for r in good])
    rebuild = spread([_rate(r.events, r.rebuild_s) for r in good])
    copy = spread([_rate(r.events, r.copy_s) for r in good])
    ratios = spread([r.copy_s / r.rebuild_s for r in good if r.rebuild_s > 0])
    per = setting.events_per_delivery
    table = Table(
        "Projection throughput (events/s, median of runs, min to max)",
        ["contender", "events/s", "x bare COPY", "deliveries/s equivalent"],
        [
            ["bare COPY of the same rows", copy.shown(), "1.00", f"{copy.median / per:,.0f}"],
            [
                "projections rebuild",
                rebuild.shown(),
                f"{rebuild.median / copy.median:.2f}",
                f"{rebuild.median / per:,.0f}",
            ],
            [
                "live projector",
                live.shown(),
                f"{live.median / copy.median:.2f}",
                f"{live.median / per:,.0f}",
            ],
        ],
    )
    wanted_live = PROCESSOR_TARGET_DELIVERIES * per
    targets = [
        Target(
            "rebuild vs bare COPY",
            ">= 0.50 x bare COPY",
            f"{ratios.median:.2f} x ({ratios.low:.2f} to {ratios.high:.2f})",
            ratios.median >= 0.5,
            _by(ratios.median, 0.5, "x"),
        ),
        Target(
            "live projector keeps up with one processor at its target",
            f">= {wanted_live:,.0f} events/s ({PROCESSOR_TARGET_DELIVERIES:,} deliveries/s "
            f"x {per:g} events)",
            f"{live.median:,.0f} events/s ({live.median / per:,.0f} deliveries/s)",
            live.median >= wanted_live,
            _by(live.median, wanted_live, " events/s"),
        ),
    ]
    notes.append(
        f"Deliveries/s equivalent: events/s divided by {per:g} events per delivery "
        "(what admission writes per delivery, issue 12). The live figure is the projector's "
        "catch-up from a backlog, the highest rate it sustains: a processor writing faster "
        "than that leaves it a growing lag."
    )
    if not all(t.met for t in targets):
        notes.append(
            "What limits the projector: per record, Python work on the main thread (Avro "
            "decode, the dataclass, its JSON for event_log and its rows) and, on the writer "
            "thread, COPY formatting and the wait for PostgreSQL's upserts and index "
            "maintenance; a bare COPY is PostgreSQL's work alone. The profiles below show the "
            "split: Projector._map (decode, project) against Projector._apply (Store.write)."
        )
    for name, frames in setting.profiles.items():
        notes.append(
            f"py-spy profile of {name} (inclusive share of the CPU samples of both threads):\n"
            + "\n".join(frames)
        )
    series = [
        Series(
            "projection",
            "events/s",
            ["bare COPY", "rebuild", "live"],
            [copy.median, rebuild.median, live.median],
            ylabel="events/s",
        )
    ]
    return Section(ORDER, "Projection", intro, [table], notes, series, targets)


def _by(measured: float, wanted: float, unit: str) -> str:
    digits = 2 if unit == "x" else 0
    if measured >= wanted:
        return f"met, {measured / wanted:.2f} times the target"
    return f"short by {wanted - measured:,.{digits}f}{unit} ({measured / wanted:.0%} of the target)"


def top_frames(raw_lines: Iterable[str], limit: int = 15) -> list[str]:
    """The ``limit`` functions with the largest inclusive share of a py-spy raw profile.

    Each line of the profile is ``frame;frame;... count``; a frame is
    ``function (file:line)``. Functions are named with their file's last path part; a
    function on a stack more than once counts once per sample; the interpreter's start-up
    and thread frames are left out.
    """
    inclusive: Counter[str] = Counter()
    total = 0
    for line in raw_lines:
        stack, _, count = line.rstrip().rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        for name in {_frame_name(f) for f in stack.split(";")}:
            if not name.startswith(_WRAPPERS) and "<frozen" not in name:
                inclusive[name] += n
    if total == 0:
        return []
    ranked = sorted(inclusive.items(), key=lambda item: (-item[1], item[0]))[:limit]
    return [f"{100 * n / total:5.1f}%  {name}" for name, n in ranked]


# The interpreter's and the profiled script's own frames (on every stack, saying nothing).
_WRAPPERS = (
    "<module>",
    "_run_code",
    "_run_module_as_main",
    "main (",
    "Thread.",
    "_bootstrap",
    "_worker (",
    "_WorkItem.",
)


def _frame_name(frame: str) -> str:
    function, _, where = frame.partition(" (")
    path = where.rsplit(":", 1)[0]
    return f"{function} ({path.rsplit('/', 1)[-1]})" if where else function
