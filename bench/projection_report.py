"""Section 4's report, from the measurements alone (pure: no Kafka, no PostgreSQL).

:func:`section` turns the runs of :mod:`bench.projection` into a :class:`bench.results.Section`:
the table of rates (median of the runs, min to max), the targets of issue 12 and the notes;
:func:`top_frames` condenses a py-spy ``--format raw`` profile to the frames a note quotes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from bench.results import Cell, Section, Series, Table, Target, spread

ORDER = 4
REBUILD_TARGET = 0.5
"""A rebuild should project at least this share of a bare COPY's rate (issue 12)."""
GROWTH_SHARE = 0.05
"""A lag that grows by less than this share of what the processor writes per second, over the
second half of an admission, counts as bounded (noise, batch boundaries)."""


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
    rebuild_one_s: float = 0.0
    """A rebuild loaded by one process (``workers=1``); 0: not measured."""
    workers: int = 1
    """The processes the (default) rebuild loaded with."""


@dataclass(frozen=True)
class Setting:
    """What every run shares: the history and the live projector's batch size."""

    events: int
    deliveries: int
    rows: int
    events_per_delivery: float
    batch_size: int
    profiles: dict[str, list[str]] = field(default_factory=dict)
    cores: int = 0
    """The machine's cores (0: not known)."""
    rebuild_workers: int = 1
    """The processes a rebuild loaded with (its default on this machine and history)."""


@dataclass(frozen=True)
class Sample:
    at_s: float
    outcomes: int
    lag: int | None
    """None until the projector has stored any offset."""


@dataclass(frozen=True)
class KeepUp:
    """One keep-up run (``bench/keepup.py``): a processor admitting a backlog and the live
    projector beside it, sampled every half second."""

    deliveries: int
    admitted_s: float
    """From starting both processes to the last outcome visible."""
    samples: list[Sample]
    caught_up_s: float | None
    """From the last outcome visible to a lag of at most one offset per partition (None:
    not within the catch-up bound)."""
    written: int
    """Offsets the processor wrote to the projected topics in all."""
    cpu_s: dict[str, float] = field(default_factory=dict)
    """CPU seconds per part (processor, projector, PostgreSQL, broker) from the start of both
    processes until the last outcome was seen visible (within one sample of it)."""
    cpu_over_s: float = 0.0
    """The seconds :attr:`cpu_s` was read over."""
    cpu_caught_s: dict[str, float] = field(default_factory=dict)
    """CPU seconds per part from the start until the projection caught up (empty: it did
    not, or an older run): the whole cost of projecting the backlog's records."""
    projectors: int = 1
    """Live projector processes, each with its share of the partitions (``--share K/N``);
    their CPU is :attr:`cpu_s`'s ``projector``."""

    @property
    def rate(self) -> float:
        return self.deliveries / self.admitted_s

    @property
    def written_per_s(self) -> float:
        return self.written / self.admitted_s

    def during(self) -> list[Sample]:
        return [s for s in self.samples if s.at_s <= self.admitted_s and s.lag is not None]

    @property
    def max_lag(self) -> int:
        return max((s.lag or 0 for s in self.during()), default=0)

    @property
    def lag_at_end(self) -> int:
        during = self.during()
        return (during[-1].lag or 0) if during else 0

    @property
    def growth_per_s(self) -> float:
        """Lag growth over the second half of the admission (offsets per second)."""
        half = [s for s in self.during() if s.at_s >= self.admitted_s / 2]
        if len(half) < 2 or half[-1].at_s <= half[0].at_s:
            return 0.0
        return ((half[-1].lag or 0) - (half[0].lag or 0)) / (half[-1].at_s - half[0].at_s)

    @property
    def bounded(self) -> bool:
        """Kept up: over the second half of the admission the lag grew by less than
        :data:`GROWTH_SHARE` of what the processor wrote per second, and the projector
        caught up afterwards."""
        return (
            self.caught_up_s is not None and self.growth_per_s <= GROWTH_SHARE * self.written_per_s
        )


def _processes(workers: int) -> str:
    return "one process" if workers == 1 else f"{workers} worker processes"


def _one_process_rows(good: Sequence[Run], per: float) -> list[list[Cell]]:
    """The row of the rebuild loaded by one process, when the runs measured it."""
    measured = [r for r in good if r.rebuild_one_s > 0]
    if not measured:
        return []
    rate = spread([_rate(r.events, r.rebuild_one_s) for r in measured])
    ratio = spread([r.copy_s / r.rebuild_one_s for r in measured])
    return [
        [
            "projections rebuild, one process",
            rate.shown(),
            f"{ratio.median:.2f}",
            f"{rate.median / per:,.0f}",
        ]
    ]


def _rate(events: int, seconds: float) -> float:
    return events / seconds if seconds > 0 else 0.0


def section(setting: Setting, runs: Sequence[Run], keepups: Sequence[KeepUp] = ()) -> Section:
    """The section of ``docs/benchmarks.md`` for these runs (failed runs are named, not used)
    and the keep-up runs beside a processor."""
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
        "load, the merged tables' rows held in memory and written once, swap; loaded by "
        f"{_processes(setting.rebuild_workers)}, its default here) and a bare "
        "`COPY` of the rebuilt rows, as text, into freshly migrated "
        "tables (same indexes) in one transaction. Every run's table counts are checked "
        "against the pure model of the same history."
    )
    if not good:
        return Section(ORDER, "Projection", intro, notes=notes or ["No run completed."])
    live = spread([_rate(r.events, r.live_s) for r in good])
    rebuild = spread([_rate(r.events, r.rebuild_s) for r in good])
    copy = spread([_rate(r.events, r.copy_s) for r in good])
    # Side by side in each run, so each run's own ratio: the machine's pace cancels out.
    ratios = spread([r.copy_s / r.rebuild_s for r in good if r.rebuild_s > 0])
    live_ratios = spread([r.copy_s / r.live_s for r in good if r.live_s > 0])
    shown = _digits(ratios.median, REBUILD_TARGET)
    per = setting.events_per_delivery
    table = Table(
        "Projection throughput (events/s, median of runs, min to max)",
        ["contender", "events/s", "x bare COPY", "deliveries/s equivalent"],
        [
            ["bare COPY of the same rows", copy.shown(), "1.00", f"{copy.median / per:,.0f}"],
            [
                "projections rebuild",
                rebuild.shown(),
                f"{ratios.median:.{shown}f}",
                f"{rebuild.median / per:,.0f}",
            ],
            *_one_process_rows(good, per),
            [
                "live projector",
                live.shown(),
                f"{live_ratios.median:.2f}",
                f"{live.median / per:,.0f}",
            ],
        ],
    )
    targets = [
        Target(
            "rebuild vs bare COPY",
            f">= {REBUILD_TARGET:.2f} x bare COPY",
            f"{ratios.median:.{shown}f} x ({ratios.low:.{shown}f} to {ratios.high:.{shown}f})",
            ratios.median >= REBUILD_TARGET,
            _by(ratios.median, REBUILD_TARGET, "x"),
        ),
    ]
    groups = by_projectors(keepups)
    targets.append(_keep_up_target(groups))
    tables = [table]
    if keepups:
        tables.append(_keep_up_table(keepups))
        notes.append(_keep_up_note(keepups))
    for i, group in enumerate(groups.values()):
        cpu = _keep_up_cpu_table(group, setting.cores)
        if cpu is not None:
            tables.append(cpu)
        limit = _keep_up_cpu_note(group, setting.cores, explain=i == 0)
        if limit:
            notes.append(limit)
    notes.append(
        f"Deliveries/s equivalent: events/s divided by {per:g} events per delivery "
        "(issue 12's figure for what admission writes per delivery). The live figure is the "
        "projector's catch-up from a backlog, the highest rate it sustains on this history "
        "(admission and gate events, about 11 records per delivery)."
    )
    if not all(t.met for t in targets):
        notes.append(
            "What limits the projector: per record, Python work on the main thread (Avro "
            "decode, the dataclass, its JSON for event_log and its rows) and, on the writer "
            "thread, COPY formatting and the wait for PostgreSQL's upserts and index "
            "maintenance; a bare COPY is PostgreSQL's work alone. The profiles below show the "
            "split: Projector._map (decode, project) against BatchWriter._apply (Store.write). "
            "A rebuild upserts nothing per batch: it copies event_log and holds the other "
            "tables' rows back (Projector._flush_held writes them at the end, into empty "
            "tables with a plain COPY), so decode and mapping limit it; its load runs in "
            "worker processes (one per core), which on this machine share the cores with "
            "PostgreSQL and write their held rows one after the other."
        )
    for name, frames in setting.profiles.items():
        notes.append(
            f"py-spy profile of {name} (inclusive share of the CPU samples of every thread, "
            "a rebuild's worker processes included):\n" + "\n".join(frames)
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
    series.extend(_lag_series(keepups))
    return Section(ORDER, "Projection", intro, tables, notes, series, targets)


_KEEP_UP = "the live projection keeps up with one processor admitting a backlog"


def by_projectors(keepups: Sequence[KeepUp]) -> dict[int, list[KeepUp]]:
    """The keep-up runs by how many live projectors shared the partitions, fewest first."""
    groups: dict[int, list[KeepUp]] = {}
    for k in sorted(keepups, key=lambda k: k.projectors):
        groups.setdefault(k.projectors, []).append(k)
    return groups


def _projectors(n: int) -> str:
    """How ``n`` live projectors are named in the tables and targets."""
    return "one projector" if n == 1 else f"{n} projectors (--share K/{n})"


_KEEP_UP_WANTED = (
    f"lag bounded: grows < {GROWTH_SHARE:.0%} of what the processor writes per s over the "
    "admission's second half, caught up after"
)


def _keep_up_target(groups: dict[int, list[KeepUp]]) -> Target:
    """The issue's one keep-up target, measured with each projector count: met when every
    run of some count kept up (the measured column names each count's runs)."""
    if not groups:
        return Target(_KEEP_UP, _KEEP_UP_WANTED, "not measured", False, "no keep-up run")
    measured, behind = [], []
    met_with: list[int] = []
    for n, runs in groups.items():
        growth = spread([k.growth_per_s for k in runs])
        written = spread([k.written_per_s for k in runs])
        bounded = sum(k.bounded for k in runs)
        if bounded == len(runs):
            met_with.append(n)
        who = "" if len(groups) == 1 else f"{_projectors(n)}: "
        measured.append(
            f"{who}lag +{growth.median:,.0f} offsets/s, {bounded} of {len(runs)} runs bounded"
        )
        behind.append(
            f"{who}the lag grew {growth.median:,.0f} offsets/s while the processor wrote "
            f"{written.median:,.0f}/s, {growth.median / written.median:.0%} of its output"
        )
    by = (
        f"met in every run with {_projectors(met_with[0])}"
        if met_with
        else "; ".join(behind) + ": the projection fell behind"
    )
    return Target(_KEEP_UP, _KEEP_UP_WANTED, "; ".join(measured), bool(met_with), by)


def _keep_up_table(keepups: Sequence[KeepUp]) -> Table:
    rows: list[list[Cell]] = []
    for i, k in (pair for group in by_projectors(keepups).values() for pair in enumerate(group)):
        rows.append(
            [
                str(i + 1),
                _projectors(k.projectors),
                f"{k.rate:,.0f}",
                f"{k.written_per_s:,.0f}",
                f"{k.growth_per_s:+,.0f}",
                f"{k.max_lag:,}",
                f"{k.lag_at_end:,}",
                "-" if k.caught_up_s is None else f"{k.caught_up_s:.1f} s",
                "yes" if k.bounded else "no",
            ]
        )
    return Table(
        f"Live projector beside one processor admitting {keepups[0].deliveries:,} deliveries",
        [
            "run",
            "live projectors",
            "processor deliveries/s",
            "written offsets/s",
            "lag growth /s (2nd half)",
            "largest lag",
            "lag at last outcome",
            "caught up after",
            "bounded",
        ],
        rows,
    )


def _keep_up_note(keepups: Sequence[KeepUp]) -> str:
    return (
        "Keep-up runs (`bench/keepup.py`): one `sluicegate processor` admitting a backlog of "
        f"{keepups[0].deliveries:,} deliveries and one `sluicegate projector` (or N of them, "
        "`--share K/N`, as `sluicegate serve --projectors N` runs them), separate "
        "processes on the same 2 cores, the projectors' lag (offsets of `runs` and `tasks` "
        "between each partition's end and the next offset stored in PostgreSQL; a "
        "transaction marker counts one) sampled every 0.5 s; runs of each count interleaved. "
        "Its processor rate is lower than "
        "section 1's: the projectors and PostgreSQL take CPU from it."
    )


CPU_PARTS = ("processor", "broker", "projector", "PostgreSQL")
"""The parts whose CPU a keep-up run reads, in the order the table shows them."""


def _cpu_runs(keepups: Sequence[KeepUp]) -> list[KeepUp]:
    return [k for k in keepups if k.cpu_s and k.cpu_over_s > 0]


def _keep_up_cpu_table(keepups: Sequence[KeepUp], cores: int) -> Table | None:
    """Each part's CPU while the processor admitted, per delivery and in cores (median of the
    runs, min to max): who used the machine the projector shared."""
    measured = _cpu_runs(keepups)
    if not measured:
        return None
    rows: list[list[Cell]] = []
    for name in (*CPU_PARTS, "together"):
        runs = [k for k in measured if name == "together" or name in k.cpu_s]
        if not runs:
            continue
        used = [sum(k.cpu_s.values()) if name == "together" else k.cpu_s[name] for k in runs]
        per = spread([u / k.deliveries * 1e6 for u, k in zip(used, runs, strict=True)])
        busy = spread([u / k.cpu_over_s for u, k in zip(used, runs, strict=True)])
        of = f" of {cores}" if name == "together" and cores else ""
        rows.append(
            [
                name,
                f"{per.median:,.0f} ({per.low:,.0f} to {per.high:,.0f})",
                f"{busy.median:.2f}{of} ({busy.low:.2f} to {busy.high:.2f})",
            ]
        )
    n = keepups[0].projectors
    beside = "the projector" if n == 1 else f"{n} projectors sharing the partitions"
    return Table(
        f"CPU while the processor admitted beside {beside} (median of runs, min to max)",
        ["part", "CPU per delivery (us)", "cores"],
        rows,
    )


def _keep_up_cpu_note(keepups: Sequence[KeepUp], cores: int, *, explain: bool = True) -> str:
    """What the CPU figures say limits the projector beside a processor ('' if unmeasured);
    ``explain`` adds what PostgreSQL's part is (once per section)."""
    measured = _cpu_runs(keepups)
    if not measured:
        return ""

    def per_delivery(*names: str) -> float:
        return spread(
            [sum(k.cpu_s.get(n, 0.0) for n in names) / k.deliveries * 1e6 for k in measured]
        ).median

    busy = spread([sum(k.cpu_s.values()) / k.cpu_over_s for k in measured]).median
    projecting = per_delivery("projector", "PostgreSQL")
    admitting = per_delivery("processor", "broker")
    of = f" of the machine's {cores}" if cores else ""
    n = keepups[0].projectors
    beside = "" if n == 1 else f" ({n} projectors sharing the partitions)"
    explain_postgres = _POSTGRES_PART if explain else ""
    caught = [k for k in measured if k.cpu_caught_s]
    whole = ""
    if caught:
        full = spread(
            [
                (k.cpu_caught_s.get("projector", 0.0) + k.cpu_caught_s.get("PostgreSQL", 0.0))
                / k.deliveries
                * 1e6
                for k in caught
            ]
        ).median
        whole = (
            f" Until caught up, projecting took {full:,.0f} us of CPU per delivery, "
            f"{full / admitting:.1f} times what admitting it took: on cores the four share, "
            "the projection keeps up only while it gets that many times the CPU the processor "
            "and the broker get."
        )
    return (
        f"CPU beside the processor{beside}: the four parts together kept {busy:.2f} "
        f"cores{of} busy. "
        f"Projecting a delivery's records took {projecting:,.0f} us of CPU (the projector and "
        f"PostgreSQL's backends, autovacuum included), admitting it {admitting:,.0f} us "
        "(the processor and the broker), both until the last outcome." + whole + explain_postgres
    )


_POSTGRES_PART = (
    " Whatever the machine has left after admission is what the projector and PostgreSQL "
    "share, so keeping up needs projecting to cost no more than that share of each delivery. "
    "PostgreSQL's part is the rows' COPY (straight into event_log and, while no key of a "
    "batch is stored yet, the 'first' tables), the upserts of the others (rows copied into a "
    "temporary table, then INSERT ... ON CONFLICT), the indexes of event_log and the tables, "
    "and parsing every record's JSON into jsonb."
)


def _lag_series(keepups: Sequence[KeepUp]) -> list[Series]:
    """The lag of each projector count's first run."""
    series = []
    for n, group in by_projectors(keepups).items():
        first = group[0]
        shown = first.samples[:: max(1, len(first.samples) // 40)]
        series.append(
            Series(
                f"Projector lag beside one processor, {_projectors(n)} (first run)",
                "lag (offsets)",
                [f"{s.at_s:.0f}" for s in shown],
                [float(s.lag or 0) for s in shown],
                kind="line",
                xlabel="seconds since start",
                ylabel="offsets behind",
            )
        )
    return series


def _digits(value: float, target: float) -> int:
    """Decimals to show a ratio with: 2, or 3 where 2 would round it across its target (a
    missed 0.497 is not shown as 0.50 beside a target of 0.50)."""
    return 2 if (round(value, 2) >= target) == (value >= target) else 3


def _by(measured: float, wanted: float, unit: str) -> str:
    digits = _digits(measured, wanted) if unit == "x" else 0
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
    "process ",
)


def _frame_name(frame: str) -> str:
    function, _, where = frame.partition(" (")
    path = where.rsplit(":", 1)[0]
    return f"{function} ({path.rsplit('/', 1)[-1]})" if where else function
