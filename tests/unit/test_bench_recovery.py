"""The recovery section's table and targets follow from its measurements."""

from __future__ import annotations

import subprocess
import sys

from bench.changelog import DISTINCT_STATES, admission_records, sample_state
from bench.recovery import Size, read_report, section
from streams.core.state_codec import decode_state


def sizes(large_rss: float, restart_records: int = 0) -> list[Size]:
    small = Size(1000, 1.0, [4.0, 5.0, 6.0], [100.0, 101.0, 99.0], [0.1, 0.2, 0.3], [0, 0, 0])
    large = Size(
        5000, 1.0, [20.0, 21.0, 22.0], [large_rss] * 3, [0.2, 0.2, 0.2], [restart_records] * 3
    )
    return [small, large]


def test_targets_met_and_missed() -> None:
    met = section(sizes(110.0), 1000, [1000, 5000])
    assert [t.met for t in met.targets] == [True, True, True]
    assert met.targets[2].measured == "100 MiB to 110 MiB (+10%)"
    missed = section(sizes(130.0, restart_records=7), 1000, [1000, 5000])
    assert [t.met for t in missed.targets] == [True, False, False]
    assert missed.tables[0].rows[1][-1] == "yes"
    assert missed.tables[0].rows[0][1] == "5.00 s (4.00 to 6.00)"


def test_a_missed_rss_target_says_what_rss_grows_with_and_a_met_one_does_not() -> None:
    def grows(section_notes: list[str]) -> list[str]:
        return [n for n in section_notes if n.startswith("What RSS grows with: ")]

    assert grows(section(sizes(110.0), 1000, [1000, 5000]).notes) == []
    (note,) = grows(section(sizes(130.0), 1000, [1000, 5000]).notes)
    assert "block cache" in note and "Tried and not adopted" in note


def test_wrong_counts_fail_the_restore_target_and_say_so() -> None:
    measured = sizes(100.0)
    measured[0].wrong.append("run 0: restored 999 of 1000")
    shown = section(measured, 1000, [1000, 5000])
    assert not shown.targets[0].met
    assert str(shown.tables[0].rows[0][-1]).startswith("NO: run 0")


def test_changelog_records_are_real_states_and_their_timers() -> None:
    key, value, due = sample_state()
    records = list(admission_records(4, far_future=True))
    assert [k[:2] for k, _ in records] == [b"s/", b"t/", b"s/", b"t/"]
    assert decode_state(value).admission_key == key
    assert records[1][0].decode().split("/")[1] > str(due)
    assert len({k for k, _ in records}) == 4


def test_changelog_states_are_distinct_occurrences_in_turn() -> None:
    records = list(admission_records(2 * (DISTINCT_STATES + 1)))
    states = [v for k, v in records if k.startswith(b"s/") and v is not None]
    assert len(set(states)) == DISTINCT_STATES  # not one value repeated
    assert states[DISTINCT_STATES] == states[0]
    decoded = decode_state(states[1])
    # Each record's key extends the admission key of the state it carries.
    assert records[2][0].decode() == f"s/{decoded.admission_key}#1"


def test_rss_at_rest_is_its_own_column_and_not_the_targets() -> None:
    measured = sizes(110.0)
    measured[1].rest_rss_mib.extend([80.0, 90.0, 85.0])
    shown = section(measured, 1000, [1000, 5000])
    header = shown.tables[0].columns
    at_rest = header.index("RSS at rest")
    assert shown.tables[0].rows[0][at_rest] == "-"  # not measured: not made up
    assert shown.tables[0].rows[1][at_rest] == "85 MiB (80 to 90)"
    assert shown.tables[0].rows[1][header.index("processor RSS")] == "110 MiB (110 to 110)"
    assert shown.targets[2].measured == "100 MiB to 110 MiB (+10%)"


def test_rss_while_restoring_is_its_own_column_and_not_the_targets() -> None:
    measured = sizes(110.0)
    measured[0].restoring_rss_mib.extend([300.0, 340.0, 320.0])
    shown = section(measured, 1000, [1000, 5000])
    column = shown.tables[0].columns.index("RSS while restoring")
    assert shown.tables[0].rows[0][column] == "320 MiB (300 to 340)"
    assert shown.tables[0].rows[1][column] == "-"
    assert shown.targets[2].measured == "100 MiB to 110 MiB (+10%)"


def test_the_report_line_comes_with_the_rss_sampled_until_it() -> None:
    # The child holds 40 MiB (touched) when it reports, and until the test lets it go.
    code = (
        "import sys; held = b'x' * (40 << 20); "
        "print('{\"restored\": 1}', flush=True); sys.stdin.read()"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        line, largest = read_report(child)
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(10)
    assert line.strip() == '{"restored": 1}'
    assert largest >= 40


def test_the_admission_on_top_of_the_retained_records_has_its_column() -> None:
    measured = sizes(110.0)
    measured[1].admit_rate = [12000.0, 11000.0, 13000.0]
    measured[1].admit_rss_mib = [90.0, 95.0, 91.0]
    shown = section(measured, 1000, [1000, 5000])
    header, rows = shown.tables[0].columns, shown.tables[0].rows
    rate, rss = header.index("then admits, deliveries/s"), header.index("RSS after admitting")
    assert rows[0][rate] == rows[0][rss] == "-"  # not measured for that size
    assert rows[1][rate] == "12,000 (11,000 to 13,000)"
    assert rows[1][rss] == "91 MiB (90 to 95)"
    assert shown.targets[2].measured == "100 MiB to 110 MiB (+10%)"  # not the target's
