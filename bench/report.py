"""``python -m bench.report``: render ``docs/benchmarks.md`` and ``docs/benchmarks.png``.

Reads every section JSON under ``--results`` (default ``docs/benchmarks``, committed with the
page, so that rerunning one section on a fresh clone renders the others from their last
results; one file per section, written by ``bench.<name> --out``), orders them by
:attr:`Section.order`, and writes:

- the Markdown page: the machine's facts at the top (cores, RAM, Python, Kafka and Postgres
  versions: those most sections were measured on, which each section's results carry) and
  when the page was written, then per section when it was measured (and on what, where
  that is another machine), its intro, its targets (met or missed, and by how much), its
  tables and its notes;
- the PNG: one panel per distinct ``Series.plot`` of all sections (bars or lines), drawn
  with matplotlib's Agg backend (no display needed).

A section whose JSON is missing is simply absent from the page; the page says which of the
known sections it lacks, so a reader never mistakes a skipped section for a passed one.
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from bench.machine import Machine, machine_facts
from bench.results import Cell, Section, Series, Target, read

KNOWN_SECTIONS = {
    1: "admission throughput",
    2: "latency",
    4: "projection",
    5: "recovery",
}


# -- Markdown ---------------------------------------------------------------------------------


def _cell(value: Cell) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 100 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(columns: Sequence[str], rows: Sequence[Sequence[Cell]]) -> list[str]:
    lines = [
        "| " + " | ".join(_cell(c) for c in columns) + " |",
        "|" + "---|" * len(columns),
    ]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


def _targets(targets: Sequence[Target]) -> list[str]:
    rows: list[list[Cell]] = [
        [t.name, t.wanted, t.measured, "met" if t.met else "**missed**", t.by or "-"]
        for t in targets
    ]
    return markdown_table(["target", "wanted", "measured", "", "by"], rows)


def render_section(section: Section, page_machine: Machine | None = None) -> list[str]:
    """One section; its "Measured" line names its machine when that is not ``page_machine``
    (the one the page's header shows)."""
    lines = [f"## {section.order}. {section.title}", ""]
    if section.measured:
        where = ""
        if section.machine is None:
            where = " (the machine it ran on was not recorded)"
        elif section.machine != page_machine:
            where = f" on another machine: {section.machine.described()}"
        lines += [f"Measured {section.measured}{where}.", ""]
    lines += [section.intro, ""]
    if section.targets:
        met = sum(t.met for t in section.targets)
        lines += [f"**Targets: {met} of {len(section.targets)} met.**", ""]
        lines += [*_targets(section.targets), ""]
    for table in section.tables:
        lines += [f"### {table.title}", "", *markdown_table(table.columns, table.rows), ""]
    if section.notes:
        lines += ["### Notes", ""]
        for note in section.notes:
            if "\n" in note:  # a profile or a listing: keep its layout
                head, _, body = note.partition("\n")
                lines += [f"- {head}", "", "```", body.rstrip(), "```", ""]
            else:
                lines.append(f"- {note}")
        lines.append("")
    return lines


def render_markdown(
    sections: Sequence[Section], fallback: Machine, plot: str | None, written: str
) -> str:
    """The whole page (pure: everything it shows is in its arguments). The header shows the
    machine most sections were measured on (``fallback`` when none recorded one); each
    section says when it was measured, and on what where that differs (sections may be
    rerun alone, on another machine)."""
    ordered = sorted(sections, key=lambda s: s.order)
    machine = page_machine(ordered) or fallback
    lines = [
        "# Sluicegate benchmarks",
        "",
        'Written by `make bench` (see the README, "Benchmarks (make bench)"). Every figure '
        "is the median of the runs shown, with min and max as `median (min to max)`; "
        "contenders were measured side by side in one run on the same records, and a "
        "contender whose counts were not exact is reported as failed, never by its speed.",
        "",
        *markdown_table(
            ["machine", ""],
            [
                ["CPU cores", machine.cores],
                ["RAM", f"{machine.ram_gib:.1f} GiB"],
                ["Python", machine.python],
                ["Kafka", machine.kafka],
                ["PostgreSQL", machine.postgres],
                ["page written", written],
            ],
        ),
        "",
    ]
    present = {s.order for s in ordered}
    missing = [f"{n}. {name}" for n, name in KNOWN_SECTIONS.items() if n not in present]
    if missing:
        lines += [f"Not in this run (no results): {', '.join(missing)}.", ""]
    if plot:
        lines += [f"![benchmark plots]({plot})", ""]
    for section in ordered:
        lines += render_section(section, machine)
    return "\n".join(lines).rstrip() + "\n"


def page_machine(sections: Sequence[Section]) -> Machine | None:
    """The machine most of ``sections`` were measured on (the first such in order on a tie),
    or ``None`` when none recorded one."""
    counts = Counter(s.machine for s in sections if s.machine is not None)
    return max(counts, key=lambda m: counts[m]) if counts else None


# -- plot -------------------------------------------------------------------------------------


def panels(sections: Sequence[Section]) -> dict[str, list[Series]]:
    """Series grouped by their ``plot`` name, in section order then series order."""
    grouped: dict[str, list[Series]] = {}
    for section in sorted(sections, key=lambda s: s.order):
        for series in section.series:
            grouped.setdefault(series.plot, []).append(series)
    return grouped


def render_png(sections: Sequence[Section], path: Path) -> bool:
    """Draw one panel per plot name; False (and no file) when no section has a series."""
    grouped = panels(sections)
    if not grouped:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    count = len(grouped)
    columns = min(2, count)
    rows = (count + columns - 1) // columns
    figure, axes = plt.subplots(rows, columns, figsize=(7 * columns, 4.5 * rows), squeeze=False)
    for ax, (name, series) in zip(axes.flat, grouped.items(), strict=False):
        _draw(ax, series)
        ax.set_title(name)
    for ax in list(axes.flat)[count:]:
        ax.set_visible(False)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True


def _draw(ax: object, series: list[Series]) -> None:
    bars = [s for s in series if s.kind == "bar"]
    lines = [s for s in series if s.kind != "bar"]
    if bars:
        width = 0.8 / len(bars)
        labels = [str(x) for x in bars[0].x]
        for i, s in enumerate(bars):
            positions = [n + i * width - 0.4 + width / 2 for n in range(len(s.x))]
            drawn = ax.bar(positions, s.y, width, label=s.label)  # type: ignore[attr-defined]
            ax.bar_label(drawn, fmt="{:,.0f}", fontsize=7)  # type: ignore[attr-defined]
        ax.set_xticks(range(len(labels)), labels, rotation=15, ha="right")  # type: ignore[attr-defined]
    for s in lines:
        ax.plot([str(x) for x in s.x], s.y, marker="o", label=s.label)  # type: ignore[attr-defined]
    values = [y for s in series for y in s.y if not math.isnan(y) and y > 0]
    if values and max(values) / min(values) > 100:  # decades apart: only a log axis shows both
        ax.set_yscale("log")  # type: ignore[attr-defined]
    first = series[0]
    ax.set_xlabel(first.xlabel)  # type: ignore[attr-defined]
    ax.set_ylabel(first.ylabel)  # type: ignore[attr-defined]
    if len(series) > 1:
        ax.legend(fontsize=8)  # type: ignore[attr-defined]
    ax.grid(axis="y", alpha=0.3)  # type: ignore[attr-defined]


def load(results: Path) -> list[Section]:
    """Every section JSON under ``results`` (a file that is not a section is an error), but
    ``*.raw.json``: a section's raw measurements, which it may keep beside it."""
    paths = sorted(p for p in results.glob("*.json") if not p.name.endswith(".raw.json"))
    return [read(path) for path in paths]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.report", description=__doc__)
    parser.add_argument("--results", type=Path, default=Path("docs/benchmarks"))
    parser.add_argument("--markdown", type=Path, default=Path("docs/benchmarks.md"))
    parser.add_argument("--png", type=Path, default=Path("docs/benchmarks.png"))
    args = parser.parse_args(argv)
    sections = load(args.results)
    drawn = render_png(sections, args.png)
    relative = os.path.relpath(args.png, args.markdown.parent) if drawn else None
    args.markdown.parent.mkdir(parents=True, exist_ok=True)
    written = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    # This machine's facts (a PostgreSQL connection) only when no section carries its own.
    fallback = page_machine(sections) or machine_facts()
    page = render_markdown(sections, fallback, relative, written)
    args.markdown.write_text(page)
    print(
        f"wrote {args.markdown} ({len(sections)} sections)" + (f" and {args.png}" if drawn else "")
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
