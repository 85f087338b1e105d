"""The benchmark report renders a hand-made section: machine facts, targets, tables, plot."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from bench.machine import Machine
from bench.report import main, page_machine, panels, render_markdown, render_png
from bench.results import Section, Series, Table, Target, read, replace_notes, write

MACHINE = Machine(cores=2, ram_gib=7.6, python="3.11.9", kafka="4.1.0", postgres="16.4")
WRITTEN = "2026-12-01 22:00 UTC"


def section(order: int = 1) -> Section:
    return Section(
        order=order,
        title="Admission throughput",
        intro="200,000 deliveries, 25% duplicates.",
        tables=[
            Table(
                "deliveries/s",
                ["contender", "deliveries/s", "ratio"],
                [["sluicegate, 1 instance", 12_345.6, "0.31"], ["limit | bare", 40_000, 1.0]],
            )
        ],
        notes=["one line note", "profile (top frames)\n  decide 27%\n  encode 16%"],
        series=[
            Series("throughput", "median", ["sluicegate", "limit"], [12_345.6, 40_000.0]),
            Series("latency", "p99", [200, 1000], [3.0, 4.0], kind="line"),
        ],
        targets=[
            Target("one instance", ">= 10,000/s", "12,346/s", True, "+23%"),
            Target("vs limit", ">= 0.5 x", "0.31 x", False, "0.19 x short"),
        ],
    )


def test_the_page_has_machine_facts_targets_tables_and_notes() -> None:
    page = render_markdown([section()], MACHINE, "benchmarks.png", WRITTEN)
    assert page.startswith("# Sluicegate benchmarks\n")
    for fact in ("| CPU cores | 2 |", "| Kafka | 4.1.0 |", "| PostgreSQL | 16.4 |", "7.6 GiB"):
        assert fact in page
    assert "## 1. Admission throughput" in page
    assert "**Targets: 1 of 2 met.**" in page
    assert "| vs limit | >= 0.5 x | 0.31 x | **missed** | 0.19 x short |" in page
    assert "| sluicegate, 1 instance | 12,346 | 0.31 |" in page
    assert "| limit \\| bare | 40,000 | 1.00 |" in page  # a pipe in a cell is escaped
    assert "```\n  decide 27%\n  encode 16%\n```" in page
    assert "![benchmark plots](benchmarks.png)" in page
    assert "Not in this run (no results): 2. latency, 4. projection, 5. recovery." in page


def test_sections_are_ordered_and_series_grouped_by_plot() -> None:
    later, first = section(order=5), section(order=1)
    page = render_markdown([later, first], MACHINE, None, WRITTEN)
    assert page.index("## 1.") < page.index("## 5.")
    assert "![" not in page
    grouped = panels([later, first])
    assert list(grouped) == ["throughput", "latency"]
    assert len(grouped["throughput"]) == 2


def test_the_png_is_drawn_and_the_cli_renders_from_json(tmp_path: Path) -> None:
    png = tmp_path / "plot.png"
    assert render_png([section()], png)
    assert png.read_bytes().startswith(b"\x89PNG")
    assert not render_png([Section(order=2, title="t", intro="i")], tmp_path / "none.png")

    results = tmp_path / "results"
    write(section(), results / "admission.json", MACHINE)
    (results / "admission.raw.json").write_text('{"rates": {}}')  # raw figures are not read
    markdown = tmp_path / "docs" / "benchmarks.md"
    assert main(["--results", str(results), "--markdown", str(markdown), "--png", str(png)]) == 0
    assert "## 1. Admission throughput" in markdown.read_text()


def test_each_section_says_when_it_was_measured() -> None:
    measured = dataclasses.replace(section(), measured="2026-12-01 21:00 UTC", machine=MACHINE)
    page = render_markdown([measured], MACHINE, None, WRITTEN)
    title = next(i for i, line in enumerate(page.splitlines()) if line.startswith("## "))
    assert page.splitlines()[title + 2] == "Measured 2026-12-01 21:00 UTC."
    assert f"| page written | {WRITTEN} |" in page


def test_the_measured_time_travels_in_the_file_not_its_mtime(tmp_path: Path) -> None:
    # A fresh clone gives every file the time of the checkout: the page must not say the
    # sections it did not rerun were measured then.
    path = tmp_path / "latency.json"
    write(Section(2, "Latency", "intro", measured="2026-12-01 21:00 UTC"), path, MACHINE)
    os.utime(path, (1_900_000_000, 1_900_000_000))
    assert read(path).measured == "2026-12-01 21:00 UTC"
    write(Section(4, "Projection", "intro"), tmp_path / "projection.json", MACHINE)
    assert read(tmp_path / "projection.json").measured.endswith(" UTC")


def test_a_section_file_from_before_the_measured_field_reads_as_of_its_mtime(
    tmp_path: Path,
) -> None:
    path = tmp_path / "recovery.json"
    path.write_text('{"order": 5, "title": "Recovery", "intro": "i"}')
    os.utime(path, (1_796_252_460, 1_796_252_460))
    assert read(path).measured == "2026-12-02 23:01 UTC"


def test_a_later_profile_replaces_its_notes_and_keeps_when_the_section_was_measured(
    tmp_path: Path,
) -> None:
    path = tmp_path / "latency.json"
    notes = ["Run 1 ...", "Profile A", "Profile B"]
    write(
        Section(2, "Latency", "intro", notes=notes, measured="2026-12-01 21:00 UTC"), path, MACHINE
    )
    replace_notes(path, "Profile", ["Profile C"])
    assert read(path).notes == ["Run 1 ...", "Profile C"]
    assert read(path).measured == "2026-12-01 21:00 UTC"


def test_the_page_renders_every_section_in_the_results_whichever_was_rerun(
    tmp_path: Path,
) -> None:
    results = tmp_path / "results"
    write(
        dataclasses.replace(section(1), measured="2026-12-01 21:00 UTC"),
        results / "a.json",
        MACHINE,
    )
    write(
        dataclasses.replace(section(4), measured="2026-12-03 14:00 UTC"),
        results / "p.json",
        MACHINE,
    )
    markdown = tmp_path / "benchmarks.md"
    main(["--results", str(results), "--markdown", str(markdown), "--png", str(tmp_path / "x.png")])
    page = markdown.read_text()
    assert "## 1. Admission throughput\n\nMeasured 2026-12-01 21:00 UTC." in page
    assert "## 4. Admission throughput\n\nMeasured 2026-12-03 14:00 UTC." in page


def test_a_section_measured_on_another_machine_says_so_and_the_header_shows_the_most() -> None:
    laptop = Machine(cores=8, ram_gib=31.2, python="3.12.1", kafka="4.1.1", postgres="16.2")
    here = dataclasses.replace(section(1), measured="2026-12-01 21:00 UTC", machine=MACHINE)
    also_here = dataclasses.replace(section(4), measured="2026-12-01 21:30 UTC", machine=MACHINE)
    there = dataclasses.replace(section(2), measured="2026-12-03 09:00 UTC", machine=laptop)
    unknown = dataclasses.replace(section(5), measured="2026-11-30 10:00 UTC")
    assert page_machine([there, here, also_here, unknown]) == MACHINE
    page = render_markdown([there, here, also_here, unknown], laptop, None, WRITTEN)
    assert "| CPU cores | 2 |" in page  # two sections ran here, one on the laptop
    assert "Measured 2026-12-01 21:00 UTC.\n" in page
    assert (
        "Measured 2026-12-03 09:00 UTC on another machine: 8 cores, 31.2 GiB, Python 3.12.1, "
        "Kafka 4.1.1, PostgreSQL 16.2." in page
    )
    assert "Measured 2026-11-30 10:00 UTC (the machine it ran on was not recorded)." in page
    alone = render_markdown([unknown], laptop, None, WRITTEN)
    assert "| CPU cores | 8 |" in alone  # no section recorded one: the machine rendering it


def test_the_machine_travels_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "admission.json"
    write(section(), path, MACHINE)
    assert read(path).machine == MACHINE
