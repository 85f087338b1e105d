"""Sections 1 and 2 turn measured runs into figures, targets and series (pure parts only), and
section 1's ceiling admits with the real core."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from bench import core_alone
from bench.admission import Timed, attempt, usage_of
from bench.admission_section import (
    CEILING,
    DBOS,
    LIMIT,
    PG_BATCH,
    PG_EACH,
    SLUICEGATE_1,
    SLUICEGATE_2,
    Results,
)
from bench.admission_section import section as admission_section
from bench.backlog import Backlog, new_stage_prefix, plan, stale_stage_topics
from bench.counts import CountsWrong, counted, expect_outcomes
from bench.latency_section import section as latency_section
from bench.latency_tables import Measured, window_s, windows_shown
from bench.limit import Output
from bench.machine import Machine
from bench.report import render_markdown
from streams.settings import load_settings

SCALE = {
    "deliveries": 1000,
    "duplicates": 0.25,
    "occurrences": 750,
    "partitions": 6,
    "dbos_deliveries": 100,
    "runs": 3,
}


def results() -> Results:
    r = Results()
    for name, rates in (
        (SLUICEGATE_1, [3000.0, 2900.0, 3100.0]),
        (SLUICEGATE_2, [4000.0, 4100.0, 3900.0]),
        (LIMIT, [46000.0, 45000.0, 47000.0]),
        (PG_EACH, [1700.0, 1600.0, 1800.0]),
        (PG_BATCH, [7800.0, 7700.0, 7900.0]),
        (DBOS, [90.0, 80.0, 100.0]),
    ):
        r.rates[name] = rates
        r.deliveries[name] = 100 if name == DBOS else 1000
    r.profile = [Output("runs", 1000, 1000, 44, 464), Output("tasks", 2250, 1000, 44, 362)]
    return r


def test_admission_targets_say_by_how_much_and_ratios_use_medians() -> None:
    s = admission_section(results(), SCALE)
    targets = {t.name: t for t in s.targets}
    assert not targets["one instance"].met
    assert targets["one instance"].by.startswith("-70%")
    assert targets["one instance vs the limit"].measured == "0.07 x"
    assert not targets["one instance vs the limit"].met
    assert targets["one instance vs Postgres batched"].measured == "0.38 x"
    assert targets["one instance vs DBOS"].measured == "33.33 x"
    assert targets["two instances vs one"].met
    assert targets["two instances vs one"].measured == "1.33 x"
    rows = {row[0]: row for row in s.tables[0].rows}
    assert rows[SLUICEGATE_1][2] == "3,000 (2,900 to 3,100)"
    assert rows[PG_EACH][4] == "1.76"
    assert s.tables[1].rows[1][2] == "2.25"
    assert s.series[0].y[0] == 3000.0


def test_a_failed_contender_shows_as_failed_never_by_its_speed() -> None:
    r = results()
    del r.rates[LIMIT]
    r.failures[LIMIT] = ["CountsWrong: runs: 999 records, 1000 expected"]
    s = admission_section(r, SCALE)
    rows = {row[0]: row for row in s.tables[0].rows}
    assert rows[LIMIT][2] == "failed"
    assert rows[LIMIT][3] == "0 ok, 1 failed"
    assert any("left out of its figure" in n for n in s.notes)
    target = next(t for t in s.targets if t.name == "one instance vs the limit")
    assert not target.met and target.measured == "not measured"
    assert "limit" not in s.series[0].x


def measured(rate: float, base: float, missing: int = 0, late: float = 0.0) -> Measured:
    return Measured(rate, 1000, [base + i / 100 for i in range(1000 - missing)], missing, late)


def test_each_rate_is_sent_long_enough_for_its_samples_within_the_bounds() -> None:
    def window(rate: float) -> float:
        return window_s(rate, longest=10.0, shortest=5.0, samples=5000)

    assert window(200) == 10.0  # 2,000 records: the longest allowed
    assert window(1000) == 5.0
    assert window(5000) == 5.0  # 25,000 records: the shortest allowed
    assert window(625) == 8.0
    assert window_s(1000, longest=3.0, shortest=5.0, samples=5000) == 3.0  # a quick look


def test_the_note_says_how_long_each_rate_was_sent() -> None:
    long_low = [[Measured(200, 2000, [], 0, 0.0), Measured(1000, 5000, [], 0, 0.0)]]
    assert windows_shown(long_low) == "10 s at 200/s, 5 s at 1,000/s"
    assert windows_shown([[Measured(200, 2000, [], 0, 0.0)]]) == "10 s per rate"
    s = latency_section(long_low, long_low)
    assert s.notes[0].startswith("Open-loop: 10 s at 200/s, 5 s at 1,000/s, send times")


def test_latency_percentiles_ratio_target_and_sustained_marks() -> None:
    webhook = [[measured(200, 5), measured(1000, 8)] for _ in range(3)]
    bare = [[measured(200, 2), measured(1000, 3)] for _ in range(3)]
    webhook[0][1] = measured(1000, 8, missing=1)
    s = latency_section(webhook, bare)
    (target,) = s.targets
    # webhook p99 at 1,000/s is 8 + 9.9 = 17.9 ms; bare 3 + 9.9 = 12.9 ms: within 3 x
    assert target.met
    assert target.measured.startswith("17.9 ms = 1.4 x")
    rows = {row[0]: row for row in s.tables[0].rows}
    assert rows["200"][1] == "10.0 ms (10.0 to 10.0)"
    assert str(rows["1,000"][4]).startswith("2 of 3")
    assert rows["1,000"][5] == "1"
    assert "Highest offered rate the webhook path sustained in every run: 200/s. At 1,000/s" in (
        " ".join(s.notes)
    )
    page = render_markdown([s], Machine(2, 8.0, "3.11", "4.1", "15"), None, "today")
    assert "## 2. Latency" in page and "**Targets: 1 of 1 met.**" in page


def test_refusals_count_as_never_arrived_and_say_so() -> None:
    refused = Measured(1000, 1000, [1.0] * 990, 10, 0.0, refused=10)
    s = latency_section([[refused]], [[measured(1000, 1)]])
    assert s.tables[0].rows[0][4] == "0 of 1 (achieved 1,000/s)"
    assert s.tables[0].rows[0][5] == "10 (10 refused)"
    assert "10 refused" in refused.summary()


def test_a_late_sender_is_not_sustained() -> None:
    assert measured(1000, 1).sustained
    late = measured(1000, 1, late=0.5)  # 1 s planned, 0.5 s late at the end
    assert not late.sustained
    assert round(late.achieved) == 667


def test_the_cpu_each_process_used_is_tabled_per_rate() -> None:
    def used(rate: float, ingest: float) -> Measured:
        cores = {"ingest": ingest, "processor": 0.4, "broker": 0.7, "benchmark process": 0.3}
        return dataclasses.replace(measured(rate, 5), cores=cores)

    webhook = [[used(200, 0.2), used(1000, 0.5)], [used(200, 0.2), used(1000, 0.6)]]
    bare = [[measured(200, 2), measured(1000, 3)] for _ in range(2)]
    s = latency_section(webhook, bare, cores=2)
    table = next(t for t in s.tables if t.title.startswith("CPU used"))
    rows = {row[0]: row for row in table.rows}
    assert rows["1,000"][1] == "0.55"  # the median of the two runs
    assert rows["1,000"][3] == "-"  # no gate process was measured
    assert rows["1,000"][-1] == "1.95 of 2"
    assert "cores: ingest 0.50" in webhook[0][1].summary()
    # Without CPU figures (another machine, or older results) there is no such table.
    assert not any(t.title.startswith("CPU") for t in latency_section(bare, bare).tables)


def test_the_time_each_loop_waited_for_a_cpu_is_tabled_per_rate() -> None:
    def waited(rate: float, ingest: float) -> Measured:
        waits = {"ingest loop": ingest, "processor loop": 0.2, "broker": 1.5}
        return dataclasses.replace(measured(rate, 5), waited=waits)

    webhook = [[waited(200, 0.05), waited(1000, 0.3)], [waited(200, 0.07), waited(1000, 0.4)]]
    bare = [[measured(200, 2), measured(1000, 3)] for _ in range(2)]
    s = latency_section(webhook, bare)
    table = next(t for t in s.tables if t.title.startswith("Waiting for a CPU"))
    assert table.columns[1] == "ingest loop (ms/s)"
    rows = {row[0]: row for row in table.rows}
    assert rows["1,000"][1:] == [
        "350 (300 to 400)",
        "200 (200 to 200)",
        "1,500 (1,500 to 1,500)",
        "-",
    ]
    assert any(n.startswith("Waiting for a CPU: from each thread's") for n in s.notes)
    assert "waited for a CPU: ingest loop 300 ms/s" in webhook[0][1].summary()
    (target,) = s.targets
    assert target.by.endswith(
        "; meanwhile the ingest's event loop waited 350 ms/s for a CPU and the processor's "
        "loop 200 ms/s"
    )
    # Without the figures (a broker elsewhere, older results) there is neither table nor note.
    plain = latency_section(bare, bare)
    assert not any(t.title.startswith("Waiting") for t in plain.tables)
    assert not any(n.startswith("Waiting") for n in plain.notes)


def test_transactions_and_the_broker_cpu_each_costs_are_tabled_per_rate() -> None:
    def counted(rate: float, transactions: int, broker: float) -> Measured:
        # 1,000 deliveries sent at ``rate``: 5 s at 200/s, 1 s at 1,000/s.
        return dataclasses.replace(
            measured(rate, 5),
            cores={"broker": broker},
            transactions=transactions,
            committed_records=1000,
            counted_s=1000 / rate,
        )

    webhook = [[counted(200, 250, 0.7), counted(1000, 40, 0.8)] for _ in range(3)]
    # A rate the sender could not keep took longer than planned: its own window counts.
    webhook[2][1] = dataclasses.replace(webhook[2][1], counted_s=2.0, transactions=80)
    s = latency_section(webhook, webhook)
    table = next(t for t in s.tables if t.title.startswith("The processor's transactions"))
    rows = {row[0]: row for row in table.rows}
    assert rows["200"][1:] == ["50 (50 to 50)", "4.0 (4.0 to 4.0)", "14.0 ms (14.0 to 14.0)"]
    assert rows["1,000"][1:] == ["40 (40 to 40)", "25.0 (12.5 to 25.0)", "20.0 ms (20.0 to 20.0)"]
    assert any(n.startswith("Transactions: the processor's own counters") for n in s.notes)
    # Results without counters (older runs, or a processor that did not answer) have no table.
    assert not any(
        t.title.startswith("The processor's")
        for t in latency_section([[measured(200, 5)]], [[measured(200, 2)]]).tables
    )


def test_the_webhook_answer_is_tabled_beside_the_visible_latency() -> None:
    def answered(rate: float, answer_base: float, ingest: float) -> Measured:
        # 1,000 posts at ``rate``, the counters read over the planned duration.
        return dataclasses.replace(
            measured(rate, 10),
            answered_ms=[answer_base + i / 100 for i in range(1000)],
            cores={"ingest": ingest},
            counted_s=1000 / rate,
        )

    webhook = [[answered(200, 2, 0.2), answered(1000, 8, 0.5)] for _ in range(3)]
    webhook[1][1] = answered(1000, 6, 0.6)
    bare = [[measured(200, 2), measured(1000, 3)] for _ in range(3)]
    s = latency_section(webhook, bare)
    table = next(t for t in s.tables if t.title.startswith("Webhook POST to its answer"))
    rows = {row[0]: row for row in table.rows}
    # answers 2..11.99 ms at 200/s: p50 7.0 ms against 15.0 ms visible
    assert rows["200"][1] == "7.0 ms (7.0 to 7.0)"
    assert rows["200"][4] == "47%"
    # 0.2 cores over 5 s for 1,000 posts: 1,000 us each; at 1,000/s 0.5 and 0.6 cores over 1 s
    assert rows["200"][5] == "1,000 us (1,000 to 1,000)"
    assert rows["1,000"][1] == "13.0 ms (11.0 to 13.0)"
    assert rows["1,000"][5] == "500 us (500 to 600)"
    assert any(n.startswith("Answers: the time from each post's") for n in s.notes)
    # Older results (no answers recorded) have no such table.
    assert not any(
        t.title.startswith("Webhook POST to its answer") for t in latency_section(bare, bare).tables
    )


def test_only_the_topics_a_stage_makes_are_stale_stage_topics() -> None:
    names = [
        "bench-0123456789.deliveries",
        "bench-abcdef0123.admission-changelog",
        "sluicegate.deliveries",
        "bench-latency",  # not a stage's prefix
        "bench-ABCDEF0123.runs",  # stages write lower-case hex
        "t-bench-0123456789.runs",
        "__consumer_offsets",
    ]
    assert stale_stage_topics(names) == [
        "bench-0123456789.deliveries",
        "bench-abcdef0123.admission-changelog",
    ]
    fresh = new_stage_prefix()
    assert stale_stage_topics([f"{fresh}runs", f"{fresh}deliveries"]) == [
        f"{fresh}deliveries",
        f"{fresh}runs",
    ]


def test_the_webhook_on_fewer_partitions_gets_its_own_tables_and_note() -> None:
    def counted(rate: float, base: float, transactions: int) -> Measured:
        return dataclasses.replace(
            measured(rate, base),
            cores={"broker": 0.6},
            transactions=transactions,
            committed_records=1000,
            counted_s=1000 / rate,
        )

    webhook = [[measured(200, 30), measured(1000, 200)] for _ in range(3)]
    bare = [[measured(200, 2), measured(1000, 3)] for _ in range(3)]
    fewer = [[counted(200, 15, 500), counted(1000, 40, 100)] for _ in range(3)]
    s = latency_section(webhook, bare, fewer=(1, fewer))
    latency = next(t for t in s.tables if t.title.endswith("1 partition per topic"))
    assert {row[0]: row[1] for row in latency.rows} == {
        "200": "20.0 ms (20.0 to 20.0)",
        "1,000": "45.0 ms (45.0 to 45.0)",
    }
    committed = next(t for t in s.tables if t.title.startswith("The processor's transactions, 1"))
    # 0.6 cores over 5 s for 500 transactions: 6.0 ms each
    assert committed.rows[0][3] == "6.0 ms (6.0 to 6.0)"
    assert any(n.startswith("Fewer partitions: in each run") for n in s.notes)
    # The target stays the default deployment's.
    (target,) = s.targets
    assert target.measured.startswith("209.9 ms")
    assert not any("per topic" in t.title for t in latency_section(webhook, bare).tables)


def test_the_exactly_once_floor_gets_its_table_ratios_note_and_a_word_in_the_target() -> None:
    webhook = [[measured(200, 30), measured(1000, 140)] for _ in range(3)]
    bare = [[measured(200, 2), measured(1000, 3)] for _ in range(3)]
    relay = [[measured(200, 20), measured(1000, 100)] for _ in range(3)]
    s = latency_section(webhook, bare, relay=relay)
    floor = next(t for t in s.tables if t.title.startswith("Exactly-once floor"))
    assert {row[0]: row[2] for row in floor.rows} == {
        "200": "29.9 ms (29.9 to 29.9)",
        "1,000": "109.9 ms (109.9 to 109.9)",
    }
    ratios = next(t for t in s.tables if t.title == "Webhook / exactly-once floor (medians)")
    # p99 at 1,000/s: webhook 149.9 ms over the floor's 109.9 ms
    assert ratios.rows[1][2] == "1.4 x"
    (target,) = s.targets
    assert not target.met
    # bare p99 12.9 ms allows 38.7 ms; the floor alone is 109.9 ms = 8.5 x bare
    assert target.by.endswith(
        "the exactly-once floor alone: 109.9 ms = 8.5 x bare, over the allowance"
    )
    assert any(n.startswith("Exactly-once floor (`bench/relay.py`)") for n in s.notes)
    assert any(series.label == "exactly-once floor p99" for series in s.series)
    without = latency_section(webhook, bare)
    assert not any(
        t.title.startswith(("Exactly-once", "Webhook / exactly")) for t in without.tables
    )
    assert "floor" not in without.targets[0].by


def test_the_ceiling_admits_with_the_real_core_and_its_counts_are_checked(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    backlog = plan(400, 0.25)
    saved = tmp_path / "backlog.bin"
    backlog.save(saved)
    assert Backlog.load(saved) == backlog
    assert core_alone.main(["--backlog", str(saved)]) == 0
    spent = json.loads(capsys.readouterr().out)  # exit 0: every count exact
    assert spent["seconds"] > 0 and 0 < spent["cpu_seconds"] <= spent["seconds"] * 1.05
    assert spent["waited_seconds"] >= 0  # Linux keeps it: schedstat is read, not guessed
    _spent, produced = core_alone.run(load_settings({}), backlog)
    outcomes, admitted, launches = counted(produced)
    assert sum(outcomes.values()) == 400
    assert len(admitted) == backlog.occurrences
    assert len(launches) == backlog.occurrences * len(backlog.slots)
    lost = dataclasses.replace(backlog, deliveries=backlog.deliveries[:-1])
    with pytest.raises(CountsWrong, match="outcomes"):
        expect_outcomes(*counted(produced), lost)
    # A backlog whose outcomes cannot add up (a delivery listed twice): counts wrong, exit 3.
    doubled = dataclasses.replace(backlog, deliveries=[*backlog.deliveries, backlog.deliveries[0]])
    doubled.save(saved)
    assert core_alone.main(["--backlog", str(saved)]) == 3


def test_the_ceiling_gets_its_row_ratio_and_note() -> None:
    r = results()
    r.rates[CEILING] = [15000.0, 14000.0, 16000.0]
    r.deliveries[CEILING] = 1000
    s = admission_section(r, SCALE)
    row = next(row for row in s.tables[0].rows if row[0] == CEILING)
    assert row[4] == "0.20"  # x1 median 3,000 over the ceiling's 15,000
    assert any(n.startswith("The ceiling (`bench/core_alone.py`)") for n in s.notes)
    assert "core alone" in s.series[0].x
    assert s.targets[0].by.endswith("the core alone (the ceiling) decides 15,000/s on one thread")
    assert not any(n.startswith("The ceiling") for n in admission_section(results(), SCALE).notes)


def test_postgres_per_delivery_on_a_prefix_says_so_and_keeps_the_share_of_repeats() -> None:
    backlog = plan(4000, 0.25)
    first = backlog.first(1000)
    assert first.deliveries == backlog.deliveries[:1000]
    assert first.workflow_value == backlog.workflow_value and first.slots == backlog.slots
    assert 0.2 <= 1 - first.occurrences / 1000 <= 0.3
    r = results()
    r.deliveries[PG_EACH] = 250
    s = admission_section(r, {**SCALE, "pg_each_deliveries": 250})
    row = next(row for row in s.tables[0].rows if row[0] == PG_EACH)
    assert row[1] == 250
    assert any(n.startswith(f"{PG_EACH} ran on the first 250 deliveries") for n in s.notes)
    # The whole backlog (and results written before the knob existed): no such note.
    for scale in (SCALE, {**SCALE, "pg_each_deliveries": 1000}):
        assert not any(n.startswith(PG_EACH) for n in admission_section(results(), scale).notes)


def test_the_cpu_each_sluicegate_run_used_is_tabled_and_named_in_the_target() -> None:
    r = results()
    r.rates[CEILING] = [16000.0]
    r.deliveries[CEILING] = 1000
    # 1,000 deliveries in 0.1 s: one instance busy 0.97 of a core (97 us a delivery), its loop
    # waiting 2 ms of the 0.1 s; two instances 0.8 of a core each in 0.05 s.
    for cores in (0.96, 0.97, 0.98):
        r.add_cpu(
            SLUICEGATE_1,
            {
                "seconds": 0.1,
                "instances": 1,
                "processor": cores / 10,
                "loop_waited": 0.002,
                "broker": 0.02,
            },
        )
    r.add_cpu(
        SLUICEGATE_2,
        {"seconds": 0.05, "instances": 2, "processor": 0.08, "loop_waited": 0.02, "broker": 0.01},
    )
    s = admission_section(r, SCALE)
    table = next(t for t in s.tables if t.title.startswith("CPU while admitting"))
    rows = {row[0]: row[1:] for row in table.rows}
    assert [row[0] for row in table.rows] == [SLUICEGATE_1, SLUICEGATE_2]
    assert rows[SLUICEGATE_1] == [
        "0.97 (0.96 to 0.98)",
        "97 (96 to 98)",
        "20 (20 to 20)",
        "0.20 (0.20 to 0.20)",
        "20 (20 to 20)",
    ]
    assert rows[SLUICEGATE_2] == [
        "0.80 (0.80 to 0.80)",
        "80 (80 to 80)",
        "200 (200 to 200)",
        "0.20 (0.20 to 0.20)",
        "10 (10 to 10)",
    ]
    assert s.targets[0].by.endswith(
        "its process used 0.97 cores (97 us of CPU per delivery), its loop waited 20 ms/s for "
        "a CPU, the broker used 0.20 cores"
    )
    assert any(n.startswith("CPU while admitting") for n in s.notes)
    # The ceiling's CPU (its own thread's, over its loop) replaces the wall-clock estimate.
    r.add_cpu(CEILING, {"seconds": 0.07, "instances": 1, "processor": 0.06, "loop_waited": 0.0})
    s = admission_section(r, SCALE)
    table = next(t for t in s.tables if t.title.startswith("CPU while admitting"))
    assert table.rows[-1] == [
        CEILING,
        "0.86 (0.86 to 0.86)",
        "60 (60 to 60)",
        "0 (0 to 0)",
        "-",
        "-",
    ]
    assert "(97 us of CPU per delivery; the core alone 60 us)" in s.targets[0].by
    raw = json.loads(json.dumps(dataclasses.asdict(r)))
    assert raw["cpu"][SLUICEGATE_1][0]["processor"] == pytest.approx(0.096)


def test_runs_without_cpu_figures_have_no_cpu_table() -> None:
    s = admission_section(results(), SCALE)
    assert not any(t.title.startswith("CPU while") for t in s.tables)
    assert "its process used" not in s.targets[0].by


def test_a_metered_run_keeps_its_broker_figure_and_one_missing_a_processor_has_none() -> None:
    used = {"processor": 18.0, "loop_waited": 0.3, "broker": 4.0}
    usage = usage_of(19.0, 1, used)
    assert usage == {"seconds": 19.0, "instances": 1.0, **used}
    Results().add_cpu(SLUICEGATE_1, usage)  # what a real run gives is what the table takes
    assert usage_of(19.0, 1, {"loop_waited": 0.3, "broker": 4.0}) == {}
    assert usage_of(19.0, 2, {"processor": 18.0, "loop_waited": 0.3})["instances"] == 2.0


def test_a_good_run_records_its_rate_and_cpu_and_a_failed_one_neither() -> None:
    r = Results()
    used = usage_of(0.1, 1, {"processor": 0.09, "loop_waited": 0.001, "broker": 0.02})
    attempt(r, SLUICEGATE_1, 1000, lambda: Timed(0.1, used))
    attempt(r, LIMIT, 1000, lambda: 0.02)  # a contender that reports seconds only

    def wrong() -> Timed:
        raise CountsWrong("runs: 999 records, 1000 expected")

    attempt(r, SLUICEGATE_2, 1000, wrong)
    assert r.rates == {SLUICEGATE_1: [10_000.0], LIMIT: [50_000.0]}
    assert list(r.cpu) == [SLUICEGATE_1]
    assert SLUICEGATE_2 in r.failures and SLUICEGATE_2 not in r.cpu
