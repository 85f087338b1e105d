"""Section 4's report (bench.projection_report): rates, targets, failed runs, profiles."""

from __future__ import annotations

import dataclasses

from bench.projection_report import KeepUp, Run, Sample, Setting, section, top_frames

SETTING = Setting(
    events=10_000, deliveries=900, rows=20_000, events_per_delivery=5, batch_size=2000
)


def test_rates_are_medians_and_the_targets_say_by_how_much() -> None:
    runs = [
        Run(10_000, live_s=1.0, rebuild_s=1.0, copy_s=0.5),
        Run(10_000, live_s=2.0, rebuild_s=0.8, copy_s=0.5),
        Run(10_000, live_s=0.5, rebuild_s=2.0, copy_s=0.5),
    ]
    s = section(SETTING, runs)
    assert s.order == 4
    rows = {row[0]: row for row in s.tables[0].rows}
    assert rows["live projector"][1] == "10,000 (5,000 to 20,000)"
    assert rows["projections rebuild"][1] == "10,000 (5,000 to 12,500)"
    assert rows["bare COPY of the same rows"][1] == "20,000 (20,000 to 20,000)"
    assert rows["projections rebuild"][2] == "0.50"
    assert rows["live projector"][3] == "2,000"
    rebuild, live = s.targets
    assert rebuild.met and rebuild.measured.startswith("0.50 x")
    assert not live.met  # keeping up is judged from keep-up runs, and there were none
    assert (live.measured, live.by) == ("not measured", "no keep-up run")


def test_a_missed_target_never_reads_as_met_and_the_table_uses_the_targets_ratio() -> None:
    # Per-run rebuild / COPY ratios 0.497, 0.46 and 0.61 (median 0.497, which rounds to the
    # target); the ratio of the median rates (10,167 / 20,000 = 0.508) would read as met.
    runs = [
        Run(10_000, live_s=1.0, rebuild_s=0.5 / 0.497, copy_s=0.5),
        Run(10_000, live_s=1.0, rebuild_s=0.4 / 0.46, copy_s=0.4),
        Run(10_000, live_s=1.0, rebuild_s=0.6 / 0.61, copy_s=0.6),
    ]
    s = section(SETTING, runs)
    rebuild, _live = s.targets
    assert not rebuild.met
    assert rebuild.measured == "0.497 x (0.460 to 0.610)"
    assert rebuild.by == "short by 0.003x (99% of the target)"
    rows = {row[0]: row for row in s.tables[0].rows}
    assert rows["projections rebuild"][2] == "0.497"


def test_a_run_with_wrong_counts_is_named_and_left_out() -> None:
    runs = [
        Run(10_000, live_s=1.0, rebuild_s=1.0, copy_s=1.0),
        Run(10_000, live_s=0.1, rebuild_s=0.1, copy_s=1.0, counts_ok=False, problems=("x",)),
    ]
    s = section(SETTING, runs)
    assert s.tables[0].rows[1][1] == "10,000 (10,000 to 10,000)"
    assert any("Run 2 failed its count check (x)" in n for n in s.notes)
    assert section(SETTING, runs[1:]).targets == []


def test_top_frames_are_inclusive_once_per_sample_without_wrappers() -> None:
    raw = [
        "<module> (run.py:1);f (a/x.py:3);g (a/y.py:9);f (a/x.py:4) 3",
        "<module> (run.py:1);h (b/z.py:1) 1",
        "not a profile line",
    ]
    assert top_frames(raw) == [" 75.0%  f (x.py)", " 75.0%  g (y.py)", " 25.0%  h (z.py)"]


def keep_up(lags: list[int], caught_up_s: float | None = 2.0) -> KeepUp:
    """Admission over 10 s, one sample a second, 10,000 offsets written (1,000/s)."""
    samples = [Sample(float(t + 1), 100 * t, lag) for t, lag in enumerate(lags)]
    return KeepUp(1000, 10.0, samples, caught_up_s, written=10_000)


def test_a_projector_keeps_up_when_its_lag_stops_growing_and_it_catches_up() -> None:
    steady = keep_up([50, 300, 250, 320, 280, 310, 260, 300, 290, 305])
    falling_behind = keep_up([100, 200, 300, 400, 500, 600, 700, 800, 900, 1000])
    assert steady.bounded and steady.max_lag == 320 and steady.lag_at_end == 305
    assert not falling_behind.bounded
    assert falling_behind.growth_per_s == 100.0  # 500 at 5 s to 1,000 at 10 s
    assert not keep_up([50] * 10, caught_up_s=None).bounded  # never caught up afterwards

    runs = [Run(10_000, live_s=1.0, rebuild_s=1.0, copy_s=0.5)]
    met = section(SETTING, runs, [steady, steady]).targets[1]
    assert met.met and met.by == "met in every run with one projector"
    missed = section(SETTING, runs, [steady, falling_behind, falling_behind]).targets[1]
    assert not missed.met
    assert missed.measured == "lag +100 offsets/s, 1 of 3 runs bounded"
    assert "wrote 1,000/s, 10% of its output: the projection fell behind" in missed.by
    table = section(SETTING, runs, [falling_behind]).tables[1]
    assert table.rows[0][1:5] == ["one projector", "100", "1,000", "+100"]
    assert table.rows[0][-1] == "no"


def test_keep_up_with_projectors_sharing_the_partitions_is_measured_beside_one() -> None:
    steady = keep_up([50, 300, 250, 320, 280, 310, 260, 300, 290, 305])
    falling_behind = keep_up([100, 200, 300, 400, 500, 600, 700, 800, 900, 1000])
    cpu = {"processor": 0.2, "broker": 0.3, "projector": 0.4, "PostgreSQL": 0.5}
    shared = dataclasses.replace(steady, projectors=2, cpu_s=cpu, cpu_over_s=1.0)
    alone = dataclasses.replace(falling_behind, cpu_s=cpu, cpu_over_s=1.0)
    runs = [Run(10_000, live_s=1.0, rebuild_s=1.0, copy_s=0.5)]
    # Interleaved as measured; grouped by projector count, fewest first.
    s = section(SETTING, runs, [shared, alone, shared, alone])
    [keep] = s.targets[1:]  # the one target, measured with each count
    assert keep.met and keep.by == "met in every run with 2 projectors (--share K/2)"
    assert keep.measured == (
        "one projector: lag +100 offsets/s, 0 of 2 runs bounded; "
        "2 projectors (--share K/2): lag +5 offsets/s, 2 of 2 runs bounded"
    )
    assert not section(SETTING, runs, [alone, alone]).targets[1].met
    assert [row[:2] for row in s.tables[1].rows] == [
        ["1", "one projector"],
        ["2", "one projector"],
        ["1", "2 projectors (--share K/2)"],
        ["2", "2 projectors (--share K/2)"],
    ]
    cpu_titles = [t.title for t in s.tables if t.title.startswith("CPU while")]
    assert cpu_titles == [
        "CPU while the processor admitted beside the projector (median of runs, min to max)",
        "CPU while the processor admitted beside 2 projectors sharing the partitions "
        "(median of runs, min to max)",
    ]
    assert [x.plot for x in s.series[1:]] == [
        "Projector lag beside one processor, one projector (first run)",
        "Projector lag beside one processor, 2 projectors (--share K/2) (first run)",
    ]


def test_keep_up_cpu_is_shown_per_delivery_and_in_cores_and_named_in_a_note() -> None:
    lags = [100 * (t + 1) for t in range(10)]
    runs = [Run(10_000, live_s=1.0, rebuild_s=1.0, copy_s=0.5)]
    cpu = {"processor": 0.2, "broker": 0.3, "projector": 0.4, "PostgreSQL": 0.5}
    measured = [
        KeepUp(1000, 10.0, keep_up(lags).samples, None, 10_000, cpu_s=cpu, cpu_over_s=1.0),
        KeepUp(
            1000,
            10.0,
            keep_up(lags).samples,
            None,
            10_000,
            cpu_s={k: 2 * v for k, v in cpu.items()},
            cpu_over_s=2.0,
        ),
        keep_up(lags),  # read no CPU (an older run): left out of the CPU figures
    ]
    setting = Setting(10_000, 900, 20_000, 5, 2000, cores=2)
    s = section(setting, runs, measured)
    table = next(t for t in s.tables if t.title.startswith("CPU while the processor"))
    rows = {row[0]: row[1:] for row in table.rows}
    assert rows["processor"] == ["300 (200 to 400)", "0.20 (0.20 to 0.20)"]
    assert rows["PostgreSQL"] == ["750 (500 to 1,000)", "0.50 (0.50 to 0.50)"]
    assert rows["together"] == ["2,100 (1,400 to 2,800)", "1.40 of 2 (1.40 to 1.40)"]
    note = next(n for n in s.notes if n.startswith("CPU beside the processor"))
    assert "1.40 cores of the machine's 2 busy" in note
    assert "took 1,350 us of CPU" in note and "admitting it 750 us" in note
    assert not any(
        t.title.startswith("CPU while") for t in section(SETTING, runs, [keep_up(lags)]).tables
    )
    assert "Until caught up" not in note  # no run read its CPU once caught up
    caught = dataclasses.replace(
        measured[0], cpu_caught_s={**cpu, "projector": 1.0, "PostgreSQL": 1.5}
    )
    note = next(n for n in section(setting, runs, [caught]).notes if n.startswith("CPU beside"))
    # (1.0 + 1.5) s over 1,000 deliveries, against (0.2 + 0.3) s admitting them.
    assert "Until caught up, projecting took 2,500 us of CPU per delivery, 5.0 times" in note


def test_a_rebuild_loaded_by_one_process_is_shown_beside_the_default() -> None:
    runs = [
        Run(10_000, live_s=1.0, rebuild_s=1.0, copy_s=0.5, rebuild_one_s=1.25, workers=2),
        Run(10_000, live_s=1.0, rebuild_s=1.0, copy_s=0.5, rebuild_one_s=1.0, workers=2),
    ]
    s = section(dataclasses.replace(SETTING, rebuild_workers=2), runs)
    rows = {row[0]: row for row in s.tables[0].rows}
    assert rows["projections rebuild, one process"][1] == "9,000 (8,000 to 10,000)"
    assert rows["projections rebuild, one process"][2] == "0.45"
    assert "loaded by 2 worker processes" in s.intro
    assert "projections rebuild, one process" not in {
        row[0] for row in section(SETTING, [Run(10_000, 1.0, 1.0, 0.5)]).tables[0].rows
    }
