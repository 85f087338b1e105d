"""The admission CLI as users run it: ``workflows apply`` and ``publish`` in subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from schemas.codec import decode
from schemas.commands import AdmitDelivery
from streams.kafka.topics import ensure_topics
from streams.settings import Settings
from tests.support.admission import EXAMPLE_WORKFLOW, candle
from tests.support.kafka import read_topic, unique_settings

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def sluicegate(
    settings: Settings, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, SLUICEGATE_TOPIC_PREFIX=settings.topic_prefix)
    return subprocess.run(
        [sys.executable, "-m", "sluicegate.cli", *args],
        cwd=ROOT,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture()
def settings() -> Settings:
    s = unique_settings()
    ensure_topics(s)
    return s


def test_workflows_apply_publishes_a_new_revision_only_when_changed(
    settings: Settings, tmp_path: Path
) -> None:
    first = sluicegate(settings, "workflows", "apply", str(EXAMPLE_WORKFLOW), "--json")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)[0] == {
        "subscription": "btc-breakout",
        "environment": "paper",
        "revision": 1,
        "change": "new revision",
    }
    again = sluicegate(settings, "workflows", "apply", str(EXAMPLE_WORKFLOW), "--json")
    assert json.loads(again.stdout)[0]["change"] == "unchanged"

    changed = tmp_path / "changed.toml"
    changed.write_text(EXAMPLE_WORKFLOW.read_text().replace('window = "5s"', 'window = "7s"'))
    third = sluicegate(settings, "workflows", "apply", str(changed), "--json")
    assert json.loads(third.stdout)[0]["revision"] == 2
    assert len(read_topic(settings, settings.topic_named("workflows"))) == 2


def test_a_broken_workflow_file_names_every_problem_and_applies_nothing(
    settings: Settings, tmp_path: Path
) -> None:
    broken = tmp_path / "broken.toml"
    broken.write_text(
        EXAMPLE_WORKFLOW.read_text()
        .replace('window = "5s"', 'window = "5x"')
        .replace('environment  = "paper"', 'environment  = "prod"')
    )
    result = sluicegate(settings, "workflows", "apply", str(broken))
    assert result.returncode == 1
    assert "validity.window" in result.stderr and "environment" in result.stderr
    assert read_topic(settings, settings.topic_named("workflows")) == []


def test_publish_reports_malformed_lines_and_produces_only_the_good_ones(
    settings: Settings,
) -> None:
    assert sluicegate(settings, "workflows", "apply", str(EXAMPLE_WORKFLOW)).returncode == 0
    good = dict(candle(), subscription="btc-breakout", environment="paper")
    lines = [
        json.dumps(good),
        "{not json",
        json.dumps(dict(good, environment="staging")),
        json.dumps(dict(good, subscription="nobody")),
        json.dumps({k: v for k, v in good.items() if k != "venue"}),
        "",
        json.dumps(dict(good, candle_open="2026-11-30T12:01:00Z")),
        "[1, 2]",
    ]
    result = sluicegate(settings, "publish", "--json", stdin="\n".join(lines) + "\n")
    assert result.returncode == 1
    for number, reason in [
        (2, "not JSON"),
        (3, "environment"),
        (4, "unknown subscription"),
        (5, "venue"),
        (8, "not a JSON object"),
    ]:
        assert f"stdin:{number}: " in result.stderr and reason in result.stderr
    assert "published 2 deliveries; 5 malformed line(s) skipped" in result.stderr

    published = [json.loads(line) for line in result.stdout.splitlines()]
    assert [p["line"] for p in published] == [1, 7]
    produced = [
        decode(m.value() or b"") for m in read_topic(settings, settings.topic_named("deliveries"))
    ]
    deliveries = [d for d in produced if isinstance(d, AdmitDelivery)]
    assert len(deliveries) == len(produced)
    assert sorted(d.delivery_id for d in deliveries) == sorted(p["delivery_id"] for p in published)
    by_key = {m.key() for m in read_topic(settings, settings.topic_named("deliveries"))}
    assert by_key == {p["admission_key"].encode() for p in published}


def test_workflows_apply_refuses_an_identity_change_and_applies_nothing(
    settings: Settings, tmp_path: Path
) -> None:
    assert sluicegate(settings, "workflows", "apply", str(EXAMPLE_WORKFLOW)).returncode == 0
    changed = tmp_path / "reordered.toml"
    changed.write_text(
        EXAMPLE_WORKFLOW.read_text()
        .replace(
            'derived  = ["venue", "instrument", "interval", "candle_open", "rule"]',
            'derived  = ["instrument", "venue", "interval", "candle_open", "rule"]',
        )
        .replace('window = "5s"', 'window = "7s"')
    )
    result = sluicegate(settings, "workflows", "apply", str(changed))
    assert result.returncode == 1, result.stdout
    assert f"{changed}: workflow[0]" in result.stderr
    assert "identity.derived" in result.stderr and "new subscription" in result.stderr
    assert len(read_topic(settings, settings.topic_named("workflows"))) == 1


def test_publish_refuses_what_admission_would_reject_naming_the_field(settings: Settings) -> None:
    assert sluicegate(settings, "workflows", "apply", str(EXAMPLE_WORKFLOW)).returncode == 0
    good = dict(candle(), subscription="btc-breakout", environment="paper")
    lines = [
        json.dumps(good)[:-1] + ', "instrument": "ETHUSDT"}',
        json.dumps(dict(good, candle_open="2030-01-01T00:00:00Z")),
        json.dumps(dict(good, note="x" * 70_000)),
        json.dumps({k: v for k, v in good.items() if k != "source"}),
        json.dumps(dict(good, instrument="BTC\u0000USDT")),
        json.dumps({k: v for k, v in good.items() if k != "account"}),
        json.dumps(good),
    ]
    result = sluicegate(settings, "publish", "--json", stdin="\n".join(lines) + "\n")
    assert result.returncode == 1
    lines_out = [line for line in result.stderr.splitlines() if line.startswith("stdin:")]
    errors = {int(line.split(":")[1]): line for line in lines_out}
    assert "instrument" in errors[1] and "more than once" in errors[1]
    assert "source_time_in_future" in errors[2] and "candle_open" in errors[2]
    assert "payload_too_large" in errors[3]
    assert "source" in errors[4] and "missing" in errors[4]
    assert "instrument" in errors[5] and "control character" in errors[5]
    assert "account" in errors[6] and "scope" in errors[6]
    assert sorted(errors) == [1, 2, 3, 4, 5, 6]
    assert [json.loads(line)["line"] for line in result.stdout.splitlines()] == [7]
    assert len(read_topic(settings, settings.topic_named("deliveries"))) == 1


def test_publish_takes_the_intake_the_webhook_takes(settings: Settings) -> None:
    """A near-miss field name is mapped and the reserved ``token`` field removed, as the
    webhook does: the line becomes the delivery the webhook would have produced."""
    assert sluicegate(settings, "workflows", "apply", str(EXAMPLE_WORKFLOW)).returncode == 0
    clean = dict(candle(), subscription="btc-breakout", environment="paper")
    near_miss = {("Instrument" if k == "instrument" else k): v for k, v in clean.items()}
    lines = [json.dumps(clean), json.dumps(dict(near_miss, token="not-for-kafka"))]
    result = sluicegate(settings, "publish", "--json", stdin="\n".join(lines) + "\n")
    assert result.returncode == 0, result.stderr
    produced = [
        decode(m.value() or b"") for m in read_topic(settings, settings.topic_named("deliveries"))
    ]
    assert len(produced) == 2
    by_id = {d.delivery_id: d for d in produced if isinstance(d, AdmitDelivery)}
    first, second = (by_id[json.loads(line)["delivery_id"]] for line in result.stdout.splitlines())
    assert second.admission_key == first.admission_key
    assert second.payload_json == first.payload_json
    assert "token" not in json.loads(second.payload_json)


def test_publish_skips_an_overlong_line_without_holding_it(
    settings: Settings, tmp_path: Path
) -> None:
    """A file that is not JSON lines (a JSON array exported on one line) was read whole:
    277 MB made ``publish`` 1.8 GB resident before it said "not a JSON object"."""
    assert sluicegate(settings, "workflows", "apply", str(EXAMPLE_WORKFLOW)).returncode == 0
    good = dict(candle(), subscription="btc-breakout", environment="paper")
    path = tmp_path / "deliveries.jsonl"
    with path.open("w") as out:
        out.write(json.dumps(good) + "\n")
        out.write("[" + ",".join([json.dumps(good)] * 400_000) + "]\n")  # about 100 MB
        out.write(json.dumps(dict(good, candle_open="2026-11-30T12:01:00Z")) + "\n")
    size = len(path.read_bytes().splitlines()[1])
    # The largest resident size of `publish`, alone in a fresh parent.
    measured = subprocess.run(
        [
            sys.executable,
            "-c",
            "import resource, subprocess, sys; "
            "done = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
            "sys.stderr.write(done.stderr); "
            "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)",
            sys.executable,
            "-m",
            "sluicegate.cli",
            "publish",
            str(path),
        ],
        cwd=ROOT,
        env=dict(os.environ, SLUICEGATE_TOPIC_PREFIX=settings.topic_prefix),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    code, max_rss_kib = (int(n) for n in measured.stdout.split())
    assert code == 1, measured.stderr
    assert f"{path}:2: a line of {size:,} bytes, longer than the 1,048,576" in measured.stderr
    assert "published 2 deliveries; 1 malformed line(s) skipped" in measured.stderr
    assert max_rss_kib < 200 * 1024, f"publish held {max_rss_kib // 1024} MiB"
