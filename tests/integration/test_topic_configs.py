"""``topics ensure`` and every component's start read the configuration of topics that exist.

``topics ensure`` creates topics as the catalogue declares them and never changes one that
exists, so a topic created beforehand (a broker's ``auto.create.topics.enable`` gives
``cleanup.policy=delete`` and seven days) or altered by hand keeps whatever it was given. A
compacted table or changelog that lets the broker delete records forgets states (the
``workflows`` table: a destination's only revision, and every process restarted after that
refuses the destination's deliveries), so ensuring refuses it, naming the fix. A log topic
that keeps less than declared is reported: it is an operator's choice, and what it costs is
said.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from streams.kafka.topics import TopicError, ensure_topics
from streams.settings import Settings
from tests.support.kafka import set_topic_config, unique_settings

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sluicegate.cli", *args],
        cwd=ROOT,
        env=dict(
            os.environ,
            SLUICEGATE_TOPIC_PREFIX=settings.topic_prefix,
            SLUICEGATE_PARTITIONS=str(settings.partitions),
        ),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_ensure_refuses_a_table_the_broker_may_delete_and_reports_logs_that_keep_less() -> None:
    settings = unique_settings(partitions=1)
    ensure_topics(settings)
    workflows = settings.topic_named("workflows")
    set_topic_config(settings, "workflows", {"cleanup.policy": "delete"})  # as auto-created
    set_topic_config(settings, "runs", {"retention.ms": "3600000"})
    set_topic_config(settings, "journal", {"cleanup.policy": "compact"})

    refused = cli(settings, "topics", "ensure")
    print(f"\nexit {refused.returncode}: {refused.stderr.strip()}")
    assert refused.returncode == 1
    assert (
        f"{workflows} lets the broker delete records "
        "(cleanup.policy=delete, retention.ms=604800000)" in refused.stderr
    )
    assert f"--entity-name {workflows} --add-config cleanup.policy=compact" in refused.stderr
    with pytest.raises(TopicError, match=f"{workflows} lets the broker delete records"):
        ensure_topics(settings)  # what every component does at its start

    set_topic_config(settings, "workflows", {"cleanup.policy": "compact"})
    ensured = cli(settings, "topics", "ensure")
    print(ensured.stdout, ensured.stderr)
    assert ensured.returncode == 0
    runs, journal = settings.topic_named("runs"), settings.topic_named("journal")
    assert f"{runs} keeps records for 1h (declared: 30d)" in ensured.stderr
    assert f"{journal} is compacted (declared: delete after 30d)" in ensured.stderr
    assert "deliveries" not in ensured.stderr  # as declared: nothing to say


def test_a_changelog_created_by_auto_creation_stops_every_component_at_its_start() -> None:
    settings = unique_settings(partitions=1)
    ensure_topics(settings)
    set_topic_config(settings, "gateway-changelog", {"cleanup.policy": "delete"})
    changelog = settings.topic_named("gateway-changelog")
    with pytest.raises(TopicError, match=f"{changelog} lets the broker delete records"):
        ensure_topics(settings)
