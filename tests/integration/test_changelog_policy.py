"""A changelog the broker may delete records from stops the instance before it decides.

State is only as complete as its changelog. A changelog whose ``cleanup.policy`` includes
``delete`` with a finite retention (a topic created before ``topics ensure`` by a broker's
auto-creation, or altered by hand) loses the admission records older than that retention;
an instance restoring from it forgets those occurrences, and a late copy of one would be
admitted again: a second run. ``topics ensure`` never changes an existing topic, so the
instance checks its changelog's policy on every assignment and refuses, naming the fix.
"""

from __future__ import annotations

import pytest

from streams.engine.status import Phase
from tests.support.admission import AdmissionHarness, candle
from tests.support.kafka import set_topic_config, wait_until

pytestmark = pytest.mark.integration


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_changelog_that_deletes_by_time_stops_the_instance_before_it_decides(
    harness: AdmissionHarness,
) -> None:
    set_topic_config(
        harness.settings,
        "admission-changelog",
        {"cleanup.policy": "compact,delete", "retention.ms": "604800000"},
    )
    harness.deliver(candle())
    processor = harness.start_processor()
    wait_until(lambda: processor.status.snapshot().phase is Phase.STOPPED, timeout_s=60)
    reason = processor.status.snapshot().reason or ""
    changelog = harness.settings.topic_named("admission-changelog")
    assert reason.startswith("ChangelogDeletesRecords: "), reason
    assert f"{changelog} lets the broker delete records" in reason
    assert "cleanup.policy=compact,delete, retention.ms=604800000" in reason
    assert f"--entity-name {changelog} --add-config cleanup.policy=compact" in reason
    assert harness.outcomes().runs == []  # nothing decided


def test_a_changelog_that_keeps_every_record_is_accepted(harness: AdmissionHarness) -> None:
    """``delete`` with neither a time nor a size limit deletes nothing."""
    set_topic_config(
        harness.settings, "admission-changelog", {"cleanup.policy": "delete", "retention.ms": "-1"}
    )
    harness.start_processor()
    harness.deliver(candle())
    harness.wait_for_outcomes(1)
