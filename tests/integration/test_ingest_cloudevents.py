"""CloudEvents at the front door on the real broker, decided by a real processor.

One processor subprocess serves the module (its first assignment takes seconds); each test
has its own subscription under the module's topic prefix, so the tests are independent.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import tomllib
import uuid
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import orjson
import pytest

from schemas.events import (
    DeliveryDeduplicated,
    OccurrenceConflict,
    RunAdmitted,
    WorkflowRevised,
)
from streams.core.workflow import parse_workflow_file, revise
from streams.settings import Settings
from tests.support.component_process import ProcessorProcess
from tests.support.ingest import (
    REPO,
    Client,
    breakout,
    fresh_settings,
    ingest_client,
    publish_workflows,
    read_deliveries,
    read_runs,
)
from tests.support.kafka import wait_until

pytestmark = pytest.mark.integration

EXAMPLE = REPO / "examples" / "cloudevents-signals.toml"
STRUCTURED = "application/cloudevents+json"
BATCH = "application/cloudevents-batch+json"


def signals(subscription: str) -> WorkflowRevised:
    [definition] = parse_workflow_file(tomllib.loads(EXAMPLE.read_text()))
    revised = revise(None, replace(definition, subscription=subscription), int(time.time() * 1000))
    assert revised is not None
    return revised


def event(event_id: str, **changes: object) -> dict[str, object]:
    """An alert as a CloudEvent, fired a few seconds ago."""
    fired = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 5))
    out: dict[str, object] = {
        "specversion": "1.0",
        "id": event_id,
        "source": "https://alerts.example/btc",
        "type": "com.example.signal.fired",
        "time": fired,
        "datacontenttype": "application/json",
        "data": {"account": "acc-1", "instrument": "BTCUSDT", "side": "buy", "price": "97000.5"},
    }
    out.update(changes)
    return out


def binary(ce: dict[str, object]) -> tuple[bytes, dict[str, str]]:
    """The binary-mode form of ``ce``: attributes as ce- headers, data as the body."""
    headers = {f"ce-{k}": str(v) for k, v in ce.items() if k not in ("data", "datacontenttype")}
    headers["Content-Type"] = str(ce["datacontenttype"])
    return orjson.dumps(ce["data"]), headers


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Settings, dict[str, str]]]:
    settings, env = fresh_settings()
    publish_workflows(settings, signals("warmup"))
    processor = ProcessorProcess(settings, "cloudevents", tmp_path_factory.mktemp("ce"), env=env)
    processor.start()
    try:
        # The first assignment takes a few seconds: wait for one admission before measuring.
        status, answers = send(settings, "warmup", [(orjson.dumps(event("w")), STRUCTURED, {})])
        assert status == [202], answers
        try:
            wait_until(
                lambda: any(isinstance(r, RunAdmitted) for r in read_runs(settings)),
                120,
                what="the processor to admit the warm-up event",
            )
        except TimeoutError:
            pytest.fail(f"processor log:\n{processor.log_tail()}")
        yield settings, env
    finally:
        processor.stop()


async def ready(client: Client) -> None:
    deadline = time.monotonic() + 30
    while True:
        async with client.get("/readyz") as response:
            if response.status == 200:
                return
        assert time.monotonic() < deadline, "ingest not ready"
        await asyncio.sleep(0.1)


def send(
    settings: Settings,
    subscription: str,
    requests: list[tuple[bytes, str, dict[str, str]]],
    wait: str | None = None,
) -> tuple[list[int], list[Any]]:
    """POST each (body, content type, headers) in turn; the statuses and answers."""

    async def scenario() -> tuple[list[int], list[Any]]:
        statuses, answers = [], []
        async with ingest_client(settings) as client:
            await ready(client)
            for body, content_type, headers in requests:
                async with client.post(
                    f"/v1/hooks/{subscription}",
                    data=body,
                    headers={"Content-Type": content_type, **headers},
                    params={"wait": wait} if wait else {},
                ) as response:
                    statuses.append(response.status)
                    answers.append(await response.json())
        return statuses, answers

    return asyncio.run(scenario())


def outcomes_of(settings: Settings, delivery_ids: set[str]) -> list[object]:
    return [r for r in read_runs(settings) if getattr(r, "delivery_id", None) in delivery_ids]


def test_the_three_modes_for_one_event_give_one_run(stack: tuple[Settings, dict[str, str]]) -> None:
    settings, _ = stack
    publish_workflows(settings, signals("modes"))
    ce = event("evt-modes")
    body, headers = binary(ce)
    statuses, answers = send(
        settings,
        "modes",
        [
            (orjson.dumps(ce), STRUCTURED, {}),
            (body, headers.pop("Content-Type"), headers),
            (orjson.dumps([ce]), BATCH, {}),
        ],
        wait="10s",
    )
    assert statuses == [200, 200, 207], answers
    structured, binary_answer, (batched,) = answers[0], answers[1], answers[2]["results"]
    assert structured["outcome"] == "admitted"
    assert binary_answer["outcome"] == batched["outcome"] == "deduplicated"
    assert batched["status"] == 200
    run_id = structured["run_id"]
    assert binary_answer["run_id"] == batched["run_id"] == run_id
    key = "modes/paper/https%3A%2F%2Falerts.example%2Fbtc/e:evt-modes"
    assert structured["admission_key"] == binary_answer["admission_key"] == key
    ids = {structured["delivery_id"], binary_answer["delivery_id"], batched["delivery_id"]}
    decided = outcomes_of(settings, ids)
    admitted = [r for r in decided if isinstance(r, RunAdmitted)]
    assert len(admitted) == 1 and admitted[0].run_id == run_id
    assert admitted[0].event_id == "evt-modes"
    assert admitted[0].source == "https://alerts.example/btc"
    assert len([r for r in decided if isinstance(r, DeliveryDeduplicated)]) == 2
    produced = [d for d in read_deliveries(settings) if d.delivery_id in ids]
    assert len(produced) == 3
    assert {orjson.loads(d.payload_json)["data"]["side"] for d in produced} == {"buy"}


def test_a_batch_with_duplicates_and_an_invalid_event(
    stack: tuple[Settings, dict[str, str]],
) -> None:
    settings, _ = stack
    publish_workflows(settings, signals("batch"))
    first, second = event("evt-b1"), event("evt-b2")
    invalid = {k: v for k, v in event("evt-b3").items() if k != "type"}
    batch = [first, first, invalid, second, first]
    statuses, answers = send(settings, "batch", [(orjson.dumps(batch), BATCH, {})], wait="10s")
    assert statuses == [207]
    results = answers[0]["results"]
    assert [r["status"] for r in results] == [200, 200, 422, 200, 200], results
    assert results[2]["error"]["code"] == "invalid_cloudevent"
    assert [p["field"] for p in results[2]["error"]["problems"]] == ["type"]
    outcomes = [r.get("outcome") for r in results]
    # Copies in one batch are decided in order on one partition: one admitted, two copies.
    assert sorted(o for i, o in enumerate(outcomes) if i in (0, 1, 4)) == [
        "admitted",
        "deduplicated",
        "deduplicated",
    ]
    assert outcomes[3] == "admitted"
    ids = {r["delivery_id"] for r in results if "delivery_id" in r}
    assert len(ids) == 4
    produced = [d for d in read_deliveries(settings) if d.delivery_id in ids]
    assert len(produced) == 4  # read back: the good ones, the invalid one never
    assert sorted(d.event_id or "" for d in produced) == ["evt-b1"] * 3 + ["evt-b2"]
    decided = outcomes_of(settings, ids)
    assert len([r for r in decided if isinstance(r, RunAdmitted)]) == 2
    assert len([r for r in decided if isinstance(r, DeliveryDeduplicated)]) == 2


def test_same_source_and_id_with_other_immutable_data_is_a_conflict(
    stack: tuple[Settings, dict[str, str]],
) -> None:
    settings, _ = stack
    publish_workflows(settings, signals("conflict"))
    original = event("evt-c")
    changed = dict(original, data={**original["data"], "price": "1.0"})  # type: ignore[dict-item]
    statuses, answers = send(
        settings,
        "conflict",
        [(orjson.dumps(original), STRUCTURED, {}), (orjson.dumps(changed), STRUCTURED, {})],
        wait="10s",
    )
    assert statuses == [200, 200], answers
    assert answers[0]["outcome"] == "admitted"
    assert answers[1]["outcome"] == "conflict"
    assert answers[1]["run_id"] == answers[0]["run_id"]
    [conflict] = [
        r
        for r in outcomes_of(settings, {answers[1]["delivery_id"]})
        if isinstance(r, OccurrenceConflict)
    ]
    assert conflict.differing_fields == ("data.price",)


def test_spec_violations_and_the_wrong_envelope_produce_nothing(
    stack: tuple[Settings, dict[str, str]],
) -> None:
    settings, _ = stack
    publish_workflows(settings, signals("strict"), breakout("plain"))
    before = len(read_deliveries(settings))
    cases: list[tuple[str, bytes, str, dict[str, str], str]] = [
        ("strict", orjson.dumps(event("x", specversion="0.3")), STRUCTURED, {}, "specversion"),
        ("strict", orjson.dumps(event("x", time="yesterday")), STRUCTURED, {}, "time"),
        ("strict", orjson.dumps(event("")), STRUCTURED, {}, "id"),
        ("strict", b'{"side":"buy"}', "application/json", {}, "cloudevent_required"),
        ("plain", orjson.dumps(event("x")), STRUCTURED, {}, "cloudevents_not_enabled"),
    ]
    for subscription, body, content_type, headers, expected in cases:
        statuses, answers = send(settings, subscription, [(body, content_type, headers)])
        assert statuses == [422], answers
        error = answers[0]["error"]
        assert expected in (error["code"], *(p["field"] for p in error["problems"])), error
    assert len(read_deliveries(settings)) == before


def test_publish_takes_cloudevents_json_lines(stack: tuple[Settings, dict[str, str]]) -> None:
    settings, env = stack
    publish_workflows(settings, signals("lines"), breakout("plain-lines"))
    destination = {"subscription": "lines", "environment": "paper"}
    lines = [
        json.dumps({**event("evt-l1"), **destination}),
        json.dumps({**event("evt-l2", type=""), **destination}),
        json.dumps({**event("evt-l3"), "subscription": "plain-lines", "environment": "paper"}),
        json.dumps({"side": "buy", **destination}),
    ]
    result = subprocess.run(
        [sys.executable, "-m", "sluicegate.cli", "publish", "--json"],
        cwd=REPO,
        env={**os.environ, **env, "SLUICEGATE_INSTANCE_ID": uuid.uuid4().hex[:6]},
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    errors = {int(line.split(":")[1]): line for line in result.stderr.splitlines() if ":" in line}
    assert "invalid_cloudevent" in errors[2] and "attribute type" in errors[2]
    assert "cloudevents_not_enabled" in errors[3]
    assert "cloudevent_required" in errors[4]
    [published] = [json.loads(line) for line in result.stdout.splitlines()]
    assert published["line"] == 1
    assert published["admission_key"] == "lines/paper/https%3A%2F%2Falerts.example%2Fbtc/e:evt-l1"
    [delivery] = [d for d in read_deliveries(settings) if d.delivery_id == published["delivery_id"]]
    payload = orjson.loads(delivery.payload_json)
    assert "subscription" not in payload and payload["specversion"] == "1.0"
