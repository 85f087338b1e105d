"""The workflow table sees every revision written before a catch-up, every time."""

from __future__ import annotations

import pytest

from streams.adapters.workflow_table import WorkflowTable
from tests.support.admission import AdmissionHarness

pytestmark = pytest.mark.integration


def test_each_catch_up_reads_revisions_written_since_the_last_one() -> None:
    harness = AdmissionHarness(partitions=1)
    try:
        first = harness.apply_workflow()
        reader = WorkflowTable(harness.settings)
        reader.catch_up()
        for window in ("6s", "7s", "8s"):
            revised = harness.apply_workflow(validity__window=window)
            reader.catch_up()  # one call must be enough, however many came before
            current = reader.get("btc-breakout", "paper")
            assert current is not None and current.revision == revised.revision
        assert revised.revision == first.revision + 3
        reader.close()
    finally:
        harness.close()
