"""The pure parts of the rebuild's history check: which topics compare, what the messages say."""

from __future__ import annotations

from projections.history import (
    SHOWN,
    Missing,
    deleted_topics,
    dropped_line,
    refusal,
    same_topics,
)


def test_a_topic_compares_by_offset_only_under_the_id_it_was_projected_from() -> None:
    recorded = {"runs": "a", "journal": "b", "tasks": "c"}
    current = {"runs": "a", "journal": "B", "deliveries": "d"}
    # journal was created again, tasks is gone; deliveries was never recorded (a schema from
    # before ids were kept, or a topic added since): its offsets are taken as they are.
    assert same_topics(recorded, current) == {"runs", "deliveries"}
    assert deleted_topics(recorded, current) == {"journal", "tasks"}


def test_the_refusal_names_what_would_go_and_both_ways_on() -> None:
    missing = [
        Missing("runs", 2, 1_204, 0, 2_410),
        Missing("journal", 0, 1, 7, 7, deleted=True),
    ]
    text = refusal(missing, "sg_sluicegate_", "sluicegate.")
    assert "holds 1,205 records the topics no longer hold" in text
    assert "sluicegate.runs[2]: 1,204 records (offsets 0 to 2410)" in text
    assert "sluicegate.journal[0]: 1 record (offsets 7 to 7, its topic deleted since)" in text
    assert "Nothing was changed" in text
    assert "`sluicegate projections rebuild --drop-history`" in text
    assert "pg_dump --schema sg_sluicegate_" in text


def test_a_long_list_is_cut_and_says_how_much_more() -> None:
    missing = [Missing("runs", p, 1, 0, 0) for p in range(SHOWN + 3)]
    line = dropped_line(missing, "p.")
    assert line.startswith(f"dropped {SHOWN + 3} records the topics no longer hold: p.runs[0]")
    assert f"p.runs[{SHOWN - 1}]" in line
    assert f"p.runs[{SHOWN}]" not in line
    assert line.endswith("and 3 more partitions")
