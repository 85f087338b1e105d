"""The recovery section's table and targets follow from its measurements."""

from __future__ import annotations

from bench.changelog import admission_records, sample_state
from bench.recovery import Size, section
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
