"""``examples/prometheus``: every metric its alerts name is one a component serves, and its
scrape targets are the ports ``serve --health 127.0.0.1:9470`` gives (and the read API's)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import yaml

from consumers.gateway.settings import GatewaySettings
from consumers.ingest.request_metrics import RequestMetrics
from consumers.ingest.settings import DEFAULT_READ_HTTP
from projections import metrics
from projections.queries import BY_REASON, STATS_KEYS
from sluicegate.instance_metrics import render, render_projector, render_worker
from sluicegate.supervisor import components_for, health_addresses
from streams.engine.batch import ProcessorStats
from streams.engine.effects import EffectStats
from streams.engine.lag import PartitionLag
from streams.engine.status import InstanceStatus
from tests.support.prometheus import Page

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "prometheus"


def _load(name: str) -> Any:
    return yaml.safe_load((EXAMPLES / name).read_text())


def served() -> set[str]:
    """The name of every sample the components' pages hold."""
    lag = (PartitionLag("t", 0, 1, 2),)
    snapshot = replace(InstanceStatus(stalled_after_s=60.0).snapshot(), lag=lag)
    pages = [
        render(
            "gateway",
            "g",
            ProcessorStats(),
            snapshot,
            now=0,
            stalled_after_s=60,
            effects=EffectStats(),
        ),
        render_projector(
            "all",
            SimpleNamespace(messages=0, parked=0, batches=0, reconnects=0, reseeks=0),
            lag,
            ready=True,
            healthy=True,
            loop_seconds_ago=0,
        ),
        render_worker("w", 0, {"BranchFailed": 0}, healthy=True, loop_seconds_ago=0),
        metrics.render(
            {key: {"a": 0} if key in BY_REASON else 0 for key in STATS_KEYS},
            [{"topic": "runs", "partition": 0, "next_offset": 1}],
            parked=0,
        ),
    ]
    counted = RequestMetrics()
    counted.observe(503, "kafka_unavailable", 2.0)
    pages.append(counted.render())
    status_page = render("admission", "p", ProcessorStats(), snapshot, now=0, stalled_after_s=60)
    pages.append(status_page)
    return {name for page in pages for name, _ in Page(page).samples}


def test_every_metric_an_alert_names_is_served() -> None:
    names = served()
    rules = [rule for group in _load("alerts.yml")["groups"] for rule in group["rules"]]
    assert len(rules) >= 10
    for rule in rules:
        assert set(rule) <= {"alert", "expr", "for", "annotations"}, rule
        assert re.fullmatch(r"Sluicegate[A-Za-z]+", rule["alert"]), rule
        assert rule.get("for", "1m")[-1] in "smh", rule
        used = set(re.findall(r"sluicegate_[a-z0-9_]+", rule["expr"]))
        assert used and used <= names, (rule["alert"], used - names)


def test_the_scrape_targets_are_the_ports_serve_gives() -> None:
    config = _load("prometheus.yml")
    assert config["rule_files"] == ["alerts.yml"]
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    components = jobs["sluicegate-components"]["static_configs"][0]["targets"]
    given = health_addresses(components_for(GatewaySettings()), ("127.0.0.1", 9470))
    assert components == [f"{host}:{port}" for host, port in given.values()]
    assert jobs["sluicegate-read-model"]["static_configs"][0]["targets"] == [DEFAULT_READ_HTTP]
    ingest = jobs["sluicegate-ingest"]
    assert ingest["static_configs"][0]["targets"] == [DEFAULT_READ_HTTP]
    assert ingest["metrics_path"] == "/metrics/ingest"


def test_the_rule_tests_name_alerts_that_exist() -> None:
    alerts = {r["alert"] for g in _load("alerts.yml")["groups"] for r in g["rules"]}
    tests = _load("alerts_test.yml")
    assert tests["rule_files"] == ["alerts.yml"]
    named = {case["alertname"] for test in tests["tests"] for case in test["alert_rule_test"]}
    assert named and named <= alerts
