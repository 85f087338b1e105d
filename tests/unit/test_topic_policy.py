"""Which topic configurations keep what the catalogue declares (``topic_policy.py``)."""

from __future__ import annotations

import pytest

from schemas.topics import RUNS, WORKFLOWS, Role
from streams.kafka.topic_policy import Shortfall, deletes_records, refusal, shortfalls


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


@pytest.mark.parametrize(
    ("config", "found"),
    [
        ({"cleanup.policy": "delete", "retention.ms": "2592000000"}, []),  # as declared
        ({"cleanup.policy": "delete", "retention.ms": "-1"}, []),  # keeps more: no shortfall
        ({"cleanup.policy": "delete", "retention.ms": "5184000000"}, []),
        (
            {"cleanup.policy": "delete", "retention.ms": "3600000"},
            [Shortfall("retention.ms", "3600000", "2592000000")],
        ),
        ({}, [Shortfall("retention.ms", "604800000", "2592000000")]),  # Kafka's seven days
        ({"cleanup.policy": "compact"}, [Shortfall("cleanup.policy", "compact", "delete")]),
        (
            {"cleanup.policy": "compact,delete", "retention.bytes": "1048576"},
            [
                Shortfall("cleanup.policy", "compact,delete", "delete"),
                Shortfall("retention.ms", "604800000", "2592000000"),
                Shortfall("retention.bytes", "1048576", "-1"),
            ],
        ),
    ],
)
def test_a_log_topic_falls_short_when_it_keeps_less_than_declared(
    config: dict[str, str], found: list[Shortfall]
) -> None:
    assert shortfalls(RUNS, config) == found  # declared: delete after 30 days


def test_a_compacted_topic_has_no_shortfall_its_deletion_is_judged_instead() -> None:
    assert shortfalls(WORKFLOWS, {"cleanup.policy": "delete"}) == []


def test_the_refusal_says_what_is_at_stake_for_a_table_and_for_a_changelog() -> None:
    table = refusal("p.workflows", "cleanup.policy=delete", "k:9092", Role.TABLE)
    changelog = refusal("p.gateway-changelog", "cleanup.policy=delete", "k:9092")
    assert "refuses its deliveries" in table and "sluicegate workflows apply" in table
    assert "an order sent again" in changelog
    for text, topic in ((table, "p.workflows"), (changelog, "p.gateway-changelog")):
        assert "kafka-configs.sh --bootstrap-server k:9092 --alter --entity-type topics" in text
        assert f"--entity-name {topic} --add-config cleanup.policy=compact" in text
