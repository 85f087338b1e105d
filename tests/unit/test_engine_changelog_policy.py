"""Which changelog configurations keep every record (``streams/engine/changelog_policy.py``)."""

from __future__ import annotations

import pytest

from streams.engine.changelog_policy import deletes_records


@pytest.mark.parametrize(
    ("config", "why"),
    [
        ({"cleanup.policy": "compact"}, None),  # what topics ensure creates
        ({"cleanup.policy": "compact", "retention.ms": "1000"}, None),  # compaction ignores it
        ({"cleanup.policy": "delete", "retention.ms": "-1"}, None),  # nothing ever deleted
        (
            {"cleanup.policy": "delete"},  # Kafka's defaults: seven days
            "cleanup.policy=delete, retention.ms=604800000",
        ),
        (
            {"cleanup.policy": "compact, delete", "retention.ms": "3600000"},
            "cleanup.policy=compact, delete, retention.ms=3600000",
        ),
        (
            {"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "1073741824"},
            "cleanup.policy=delete, retention.bytes=1073741824",
        ),
        ({}, "cleanup.policy=delete, retention.ms=604800000"),  # a broker's auto-created topic
    ],
)
def test_a_changelog_keeps_every_record_unless_deletion_has_a_limit(
    config: dict[str, str], why: str | None
) -> None:
    assert deletes_records(config) == why
