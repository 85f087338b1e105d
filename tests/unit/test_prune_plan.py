"""Every table of the read model is either pruned with its occurrence or kept on purpose.

A table added later that names a run or an admission key, and is not in the prune's plan,
would keep rows of pruned occurrences for ever: this fails first.
"""

from __future__ import annotations

import re
from collections import Counter

from projections.migrate import migrations
from projections.model import TABLES
from projections.prune import PruneReport
from projections.prune_rows import BY_KEY, BY_RUN, KEPT

_CREATED = re.compile(r"CREATE TABLE (\w+)")


def _created() -> set[str]:
    return {name for m in migrations() for name in _CREATED.findall(m.text)}


def test_every_migrated_table_is_pruned_or_kept_on_purpose() -> None:
    plan = set(BY_KEY) | set(BY_RUN)
    assert not plan & set(KEPT)
    assert _created() == plan | set(KEPT)


def test_a_projected_table_naming_an_occurrence_is_pruned_by_a_column_it_has() -> None:
    for spec in TABLES:
        names = {"run_id", "admission_key"} & set(spec.columns)
        assert (spec.name in KEPT) == (not names), spec.name
        if spec.name in BY_KEY:
            assert "admission_key" in spec.columns, spec.name
        if spec.name in BY_RUN:
            assert "run_id" in spec.columns, spec.name


def test_the_report_reads_as_what_was_done() -> None:
    report = PruneReport("sg_x", dry_run=True, examined=5, pruned=2, runs=3, in_topics=2, held=1)
    report.rows = Counter({"event_log": 1_200, "runs": 3, "journal_holds": 0})
    assert report.describe() == (
        "projections prune: would prune 2 occurrences (3 runs, 1,203 rows) of 5 evicted or "
        "never admitted in schema sg_x; kept 2 whose records are still in the topics and 1 "
        "with a run the gateway or the gate still holds (dry run: nothing deleted)"
    )
    assert report.table_lines() == ["  event_log 1,200", "  runs 3"]
    report.dry_run, report.stopped = False, True
    assert report.describe().endswith(
        "still holds (stopped before the end: the next prune goes on)"
    )
    assert report.describe().startswith("projections prune: pruned 2 occurrences")
    report.stopped, report.keep_ms, report.young = False, 400 * 86_400_000, 7
    assert report.describe().endswith("still holds; kept 7 younger than 400d")
