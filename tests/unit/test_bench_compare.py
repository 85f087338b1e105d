"""``make bench`` compares every plotted figure with the results it replaced
(``bench/compare.py``, ``bench/run.py``)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from bench import compare, run
from bench.results import Section, Series, write

THROUGHPUT = Series(
    plot="Admission throughput",
    label="median deliveries/s",
    x=["Sluicegate x1", "limit"],
    y=[12_000.0, 70_000.0],
    ylabel="deliveries/s",
)
LATENCY = Series(
    plot="Latency",
    label="webhook p99",
    x=["200/s", "1,000/s"],
    y=[30.0, 80.0],
    kind="line",
    ylabel="ms",
)
LAG = Series(
    plot="lag", label="lag (offsets)", x=["1", "1", "2"], y=[0, 5, 9], kind="line", ylabel="ms"
)
OTHER_UNIT = Series(plot="p", label="lag", x=["a"], y=[1.0], ylabel="offsets behind")


def section(measured: str, *series: Series) -> Section:
    return Section(order=1, title="Admission", intro="", series=list(series), measured=measured)


def with_y(series: Series, *y: float) -> Series:
    return dataclasses.replace(series, y=list(y))


def test_rates_are_better_higher_and_durations_lower() -> None:
    before = section("2026-12-04 22:03 UTC", THROUGHPUT, LATENCY)
    after = section(
        "2026-12-07 14:41 UTC",
        with_y(THROUGHPUT, 6_300.0, 73_000.0),
        with_y(LATENCY, 30.0, 130.0),
    )
    found = {c.figure: c for c in compare.changes(before, after)}
    assert set(found) == {
        "median deliveries/s: Sluicegate x1",
        "median deliveries/s: limit",
        "webhook p99 at 200/s",
        "webhook p99 at 1,000/s",
    }
    assert found["median deliveries/s: Sluicegate x1"].flagged
    assert round(found["median deliveries/s: Sluicegate x1"].worse_by, 3) == 0.475
    assert not found["median deliveries/s: limit"].flagged  # faster is never flagged
    assert found["median deliveries/s: limit"].worse_by < 0
    assert found["webhook p99 at 1,000/s"].flagged  # 62% longer
    assert not found["webhook p99 at 200/s"].flagged


def test_series_without_a_direction_or_with_repeated_points_are_left_out() -> None:
    before = section("a", LAG, OTHER_UNIT)
    after = section("b", with_y(LAG, 1, 50, 90), with_y(OTHER_UNIT, 100.0))
    assert compare.changes(before, after) == []


def test_a_section_that_did_not_run_again_changes_nothing() -> None:
    kept = section("2026-12-04 22:03 UTC", THROUGHPUT)
    read_again = section("2026-12-04 22:03 UTC", with_y(THROUGHPUT, 1.0, 1.0))
    assert compare.changes(kept, read_again) == []


def test_a_figure_that_was_zero() -> None:
    before = section("a", with_y(LATENCY, 0.0, 0.0))
    after = section("b", with_y(LATENCY, 0.0, 5.0))
    found = {c.figure: c for c in compare.changes(before, after)}
    assert not found["webhook p99 at 200/s"].flagged
    assert found["webhook p99 at 1,000/s"].flagged
    assert "was 0.00 (from 0)" in found["webhook p99 at 1,000/s"].line()


def test_the_report_lists_the_worst_flagged_first_then_the_rest_in_order() -> None:
    before = section("2026-12-04 22:03 UTC", THROUGHPUT, LATENCY)
    after = section(
        "2026-12-07 14:41 UTC",
        with_y(THROUGHPUT, 9_000.0, 71_000.0),
        with_y(LATENCY, 60.0, 81.0),
    )
    lines = compare.report(compare.changes(before, after), ["2026-12-04 22:03 UTC"])
    assert lines[0].startswith("bench: against the results this run replaced (measured 2026-12-04")
    assert lines[1] == "!! Admission: webhook p99 at 200/s: 60.00 ms, was 30.00 (100% worse)"
    assert lines[2] == (
        "!! Admission: median deliveries/s: Sluicegate x1: 9,000 deliveries/s, was 12,000 "
        "(25% worse)"
    )
    assert lines[3] == (
        "   Admission: median deliveries/s: limit: 71,000 deliveries/s, was 70,000 (1% better)"
    )
    assert lines[4] == "   Admission: webhook p99 at 1,000/s: 81.00 ms, was 80.00 (1% worse)"
    assert "beside this one" in lines[5]
    assert len(lines) == 6


def test_nothing_to_compare_says_so() -> None:
    assert compare.report([]) == ["bench: no figure to compare with the results this run replaced"]


def test_a_run_prints_and_writes_its_changes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    write(section("2026-12-04 22:03 UTC", THROUGHPUT), old / "admission.json")
    write(
        section("2026-12-07 14:41 UTC", with_y(THROUGHPUT, 6_000.0, 70_000.0)),
        new / "admission.json",
    )
    (new / "latency.json").write_text("{not json")  # an unreadable section is skipped
    out = tmp_path / "changes.txt"
    run._say_changes(run._results(old), run._results(new), out)
    written = out.read_text().splitlines()
    assert written[0].endswith(
        "(measured 2026-12-04 22:03 UTC); !! marks a figure more than 15% worse:"
    )
    assert written[1].startswith("!! Admission: median deliveries/s: Sluicegate x1: 6,000")
    assert capsys.readouterr().out.splitlines() == written
