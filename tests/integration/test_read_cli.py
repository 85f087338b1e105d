"""The read side of the CLI on a real projection: runs, occurrences, stats, replay, rerun."""

from __future__ import annotations

import csv
import io
import os
import random
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from projections.projector import Projector
from projections.queries import STATS_KEYS
from projections.sources import source_topics
from schemas.codec import decode, encode
from schemas.commands import AdmitDelivery, AuthorizeRerun
from schemas.events import BranchLaunched, DeliveryRejected, RunAdmitted
from sluicegate.cli import main
from streams.adapters.replay import read_topics
from streams.kafka.topics import ensure_topics
from streams.settings import Settings
from tests.support.history import Emitted, build_history, cleanup, produce_history
from tests.support.kafka import unique_settings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

SLUICEGATE = str(Path(sys.executable).parent / "sluicegate")
NASTY = ("x'; DROP TABLE runs; --", 'a"b', "%", "_", "\\", "' OR '1'='1", "a;b")


class World:
    """One projected history shared by the tests of this module (read-only for them)."""

    def __init__(self) -> None:
        self.settings = unique_settings(partitions=6)
        ensure_topics(self.settings)
        rng = random.Random(31)
        self.history = build_history(rng, 60)
        produce_history(self.settings, self.history, rng=rng)
        with Projector(self.settings) as projector:
            projector.run_until(timeout_s=60)

    def of_type(self, cls: type) -> list[Any]:
        return [e.record for e in self.history if isinstance(e.record, cls)]


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    w = World()
    yield w
    cleanup(w.settings)


@pytest.fixture
def env(world: World, monkeypatch: pytest.MonkeyPatch) -> World:
    monkeypatch.setenv("SLUICEGATE_TOPIC_PREFIX", world.settings.topic_prefix)
    return world


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


# -- runs show / timeline ------------------------------------------------------------------------


def test_runs_show_json_has_the_frozen_context_status_and_slots(
    env: World, capsys: pytest.CaptureFixture[str]
) -> None:
    admitted = env.of_type(RunAdmitted)[0]
    code, out, _ = run_cli(capsys, "runs", "show", admitted.run_id, "--json")
    assert code == 0
    run = orjson.loads(out)
    assert run["run_id"] == admitted.run_id
    assert run["workflow_revision"] == admitted.workflow_revision
    assert run["content_digest"] == admitted.content_digest
    assert run["source_time_ms"] == admitted.source_time_ms
    assert run["expires_at_ms"] == admitted.expires_at_ms
    assert run["status"] in ("pending", "running", "completed", "failed", "skipped")
    assert [s["slot"] for s in run["slots"]] == list(admitted.slots)
    assert all(s["launches"] == 1 for s in run["slots"])


def test_runs_show_readable(env: World, capsys: pytest.CaptureFixture[str]) -> None:
    admitted = env.of_type(RunAdmitted)[0]
    code, out, _ = run_cli(capsys, "runs", "show", admitted.run_id)
    assert code == 0
    assert admitted.run_id in out
    assert "SLOT" in out and "RELAUNCHES" in out


def test_timeline_is_in_order_and_spans_topics(
    env: World, capsys: pytest.CaptureFixture[str]
) -> None:
    admitted = env.of_type(RunAdmitted)[0]
    code, out, _ = run_cli(capsys, "runs", "timeline", admitted.run_id, "--json")
    assert code == 0
    events = [orjson.loads(line) for line in out.splitlines()]
    times = [e["time_ms"] for e in events]
    assert times == sorted(times)
    assert {"deliveries", "runs", "tasks"} <= {e["topic"] for e in events}
    assert events[0]["type"] == "AdmitDelivery"
    expected = sum(1 for e in env.history if getattr(e.record, "run_id", None) == admitted.run_id)
    assert sum(1 for e in events if e["record"].get("run_id") == admitted.run_id) == expected
    code, out, _ = run_cli(capsys, "runs", "timeline", admitted.run_id)
    assert code == 0 and "RunAdmitted" in out


def test_unknown_run_says_what_to_do(env: World, capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("show", "timeline"):
        code, out, err = run_cli(capsys, "runs", command, "no-such-run")
        assert code == 1
        assert out == ""
        assert "no run 'no-such-run' in the projection" in err
        assert "sluicegate projector" in err


@pytest.mark.parametrize("value", NASTY)
def test_filters_are_parameters(env: World, capsys: pytest.CaptureFixture[str], value: str) -> None:
    for args in (
        ("runs", "show", value),
        ("runs", "timeline", value),
        ("occurrences", "show", value),
        ("runs", "rerun", value, "--reason", "x"),
    ):
        code, out, err = run_cli(capsys, *args)
        assert code == 1, (args, out, err)
        assert "in the projection" in err
    code, out, _ = run_cli(capsys, "stats", "--json")
    assert code == 0
    assert orjson.loads(out)["runs_admitted"] == len(env.of_type(RunAdmitted))


# -- occurrences ---------------------------------------------------------------------------------


def test_occurrence_by_key_and_by_delivery_id(
    env: World, capsys: pytest.CaptureFixture[str]
) -> None:
    key = env.of_type(RunAdmitted)[0].admission_key
    deliveries = [d for d in env.of_type(AdmitDelivery) if d.admission_key == key]
    code, out, _ = run_cli(capsys, "occurrences", "show", key, "--json")
    assert code == 0
    found = orjson.loads(out)
    assert found["found_by"] == "admission_key"
    assert [d["delivery_id"] for d in found["deliveries"]] == [d.delivery_id for d in deliveries]
    assert found["deliveries"][0]["outcome"] == "admitted"
    assert {d["outcome"] for d in found["deliveries"][1:]} <= {"deduplicated", "conflict"}
    code, out, _ = run_cli(capsys, "occurrences", "show", deliveries[-1].delivery_id, "--json")
    assert code == 0
    assert orjson.loads(out)["found_by"] == "delivery_id"
    assert orjson.loads(out)["admission_key"] == key
    code, out, _ = run_cli(capsys, "occurrences", "show", key)
    assert code == 0 and "DELIVERIES" in out


def test_rejected_deliveries_show_their_reason(
    env: World, capsys: pytest.CaptureFixture[str]
) -> None:
    rejected = env.of_type(DeliveryRejected)
    if not rejected:
        pytest.skip("this history has no rejection")
    code, out, _ = run_cli(capsys, "occurrences", "show", rejected[0].delivery_id, "--json")
    assert code == 0
    delivery = next(
        d for d in orjson.loads(out)["deliveries"] if d["delivery_id"] == rejected[0].delivery_id
    )
    assert (delivery["outcome"], delivery["reason"]) == ("rejected", rejected[0].reason)


# -- stats ---------------------------------------------------------------------------------------


def test_stats_json_has_exactly_the_contract_keys(
    env: World, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_cli(capsys, "stats", "--json")
    assert code == 0
    stats = orjson.loads(out)
    assert list(stats) == list(STATS_KEYS)
    assert stats["deliveries"] == len(env.of_type(AdmitDelivery))
    assert stats["runs_admitted"] == len(env.of_type(RunAdmitted))
    assert stats["branch_launches"] == len(env.of_type(BranchLaunched))
    rejected: dict[str, int] = {}
    for r in env.of_type(DeliveryRejected):
        rejected[r.reason] = rejected.get(r.reason, 0) + 1
    assert stats["rejected"] == rejected
    assert stats["holds"] == 0
    code, out, _ = run_cli(capsys, "stats")
    assert code == 0 and "runs_admitted" in out


def test_read_commands_without_a_projection_say_what_to_do(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLUICEGATE_TOPIC_PREFIX", unique_settings(partitions=6).topic_prefix)
    code, _, err = run_cli(capsys, "stats")
    assert code == 1
    assert "there is no projection" in err and "sluicegate projector" in err


# -- replay --------------------------------------------------------------------------------------


def _replay(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[dict[str, Any]]]:
    code, out, _ = run_cli(capsys, "replay", "--no-progress", *args)
    return code, [orjson.loads(line) for line in out.splitlines()]


def test_replay_all_topics_decodes_every_committed_record(
    env: World, capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines = _replay(capsys)
    assert code == 0
    assert len(lines) == len(env.history)
    assert not any("aborted-" in orjson.dumps(line).decode() for line in lines)
    assert {line["topic"] for line in lines} == {e.topic for e in env.history}
    assert {e.topic for e in env.history} <= set(source_topics())
    assert all(line["record"]["type"] == line["type"] for line in lines)


def test_replay_filters(env: World, capsys: pytest.CaptureFixture[str]) -> None:
    admitted = env.of_type(RunAdmitted)[0]
    code, lines = _replay(capsys, "--topic", "runs", "--topic", "tasks", "--run", admitted.run_id)
    assert code == 0 and lines
    assert {line["topic"] for line in lines} <= {"runs", "tasks"}
    assert all(
        admitted.run_id in (line["record"].get("run_id"), line["record"].get("rerun_of"))
        or admitted.run_id in line["record"].get("run_ids", [])
        for line in lines
    )
    expected = sum(
        1
        for e in env.history
        if (
            e.topic in ("runs", "tasks")
            and admitted.run_id
            in (getattr(e.record, "run_id", None), getattr(e.record, "rerun_of", None))
        )
        or admitted.run_id in getattr(e.record, "run_ids", ())
    )
    assert len(lines) == expected

    code, lines = _replay(capsys, "--subscription", "eth-revert")
    assert code == 0 and lines
    assert all(
        (
            line["record"].get("subscription")
            or line["record"].get("admission_key")  # the gate's records are keyed by scope
            or line["key"]
        ).startswith("eth-revert")
        for line in lines
    )

    code, lines = _replay(capsys, "--scope", admitted.scope_key, "--topic", "runs")
    assert {line["type"] for line in lines} == {"RunAdmitted"}


def test_replay_time_range(env: World, capsys: pytest.CaptureFixture[str]) -> None:
    _, everything = _replay(capsys)
    stamps = sorted(line["timestamp_ms"] for line in everything)
    middle = stamps[len(stamps) // 2]
    code, lines = _replay(capsys, "--since", str(middle))
    assert code == 0
    assert len(lines) == sum(1 for s in stamps if s >= middle)
    since = next(line["timestamp"] for line in everything if line["timestamp_ms"] == middle)
    code, lines = _replay(capsys, "--until", since)
    assert len(lines) == sum(1 for s in stamps if s < middle)


def test_replay_csv(env: World, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "replay", "--no-progress", "--format", "csv", "--topic", "runs")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == sum(1 for e in env.history if e.topic == "runs")
    assert {"topic", "offset", "type", "run_id", "admission_key"} <= set(rows[0])
    admitted = next(r for r in rows if r["type"] == "RunAdmitted")
    assert orjson.loads(admitted["slots"])


@pytest.mark.parametrize("value", NASTY)
def test_replay_filter_values_are_plain_strings(
    env: World, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    for flag in ("--subscription", "--run", "--scope"):
        code, lines = _replay(capsys, "--topic", "runs", flag, value)
        assert (code, lines) == (0, [])


def test_replay_refuses_bad_input(env: World, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "replay", "--since", "yesterday")
    assert code == 1 and "RFC 3339" in err
    code, _, err = run_cli(capsys, "replay", "--since", "2026-11-30T12:00:00")
    assert code == 1 and "offset" in err
    code, _, err = run_cli(capsys, "replay", "--topic", "nope")
    assert code == 1 and "unknown topic" in err


def test_replay_console_script_with_progress_on_stderr(env: World) -> None:
    done = subprocess.run(
        [SLUICEGATE, "replay", "--topic", "workflows"],
        env=dict(os.environ, SLUICEGATE_TOPIC_PREFIX=env.settings.topic_prefix),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == sum(1 for e in env.history if e.topic == "workflows")
    assert done.stderr.startswith("replay")


# -- rerun ---------------------------------------------------------------------------------------


def _answer_reruns(
    settings: Settings,
    stop: threading.Event,
    seen: list[tuple[Any, int]],
    ready: threading.Event,
) -> None:
    """Stand-in for the processor: admit a rerun for every AuthorizeRerun written after it
    was assigned its partitions (``ready`` is set then)."""
    consumer = Consumer(
        settings.kafka_config(
            **{"group.id": f"{settings.topic_prefix}fake", "isolation.level": "read_committed"}
        )
    )
    producer = Producer(settings.producer_config())

    def from_the_end(c: Consumer, partitions: list[TopicPartition]) -> None:
        # Each partition's end now, not a reset at the first fetch ("latest"): a request
        # produced once ``ready`` is set is read, however long the first fetch takes.
        for tp in partitions:
            tp.offset = c.get_watermark_offsets(tp, timeout=10)[1]
        c.assign(partitions)
        ready.set()

    consumer.subscribe([settings.topic_named("deliveries")], on_assign=from_the_end)
    try:
        while not stop.is_set():
            m = consumer.poll(0.1)
            if m is None or m.error():
                continue
            request = decode(m.value() or b"")
            if not isinstance(request, AuthorizeRerun):
                continue
            seen.append((request, m.partition() or 0))
            original = next(
                e.record
                for e in _WORLD_HISTORY
                if isinstance(e.record, RunAdmitted) and e.record.run_id == request.run_id
            )
            import dataclasses

            rerun = dataclasses.replace(
                original,
                run_id=original.run_id + "-rerun",
                delivery_id=request.request_id,
                rerun_number=1,
                rerun_of=request.run_id,
                rerun_reason=request.reason,
            )
            producer.produce(
                settings.topic_named("runs"),
                key=request.admission_key.encode(),
                value=encode(rerun),
            )
            producer.flush(10)
    finally:
        consumer.close()


_WORLD_HISTORY: list[Emitted] = []


def test_rerun_produces_an_authorized_request_and_waits_for_the_new_run(env: World) -> None:
    _WORLD_HISTORY[:] = env.history
    original = next(r for r in env.of_type(RunAdmitted) if r.rerun_of is None)
    stop = threading.Event()
    seen: list[tuple[Any, int]] = []
    ready = threading.Event()
    fake = threading.Thread(
        target=_answer_reruns, args=(env.settings, stop, seen, ready), daemon=True
    )
    projector = Projector(env.settings)
    follower = threading.Thread(target=projector.run, daemon=True)
    fake.start()
    follower.start()
    try:
        assert ready.wait(60), "the stand-in was never assigned its partitions"
        done = subprocess.run(
            [
                SLUICEGATE,
                "runs",
                "rerun",
                original.run_id,
                "--reason",
                "re-check it",
                "--wait",
                "20",
            ],
            env=dict(os.environ, SLUICEGATE_TOPIC_PREFIX=env.settings.topic_prefix, USER="alice"),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        stop.set()
        projector.stop.set()
        fake.join(10)
        follower.join(10)
        projector.close()
    assert done.returncode == 0, done.stderr
    assert "rerun requested: request id" in done.stdout
    assert f"new run: {original.run_id}-rerun (rerun of {original.run_id})" in done.stdout
    ((request, partition),) = seen
    assert request.run_id == original.run_id
    assert request.admission_key == original.admission_key
    assert request.requested_by == "alice"
    assert request.reason == "re-check it"
    # Keyed by admission key: on the partition of the occurrence's deliveries.
    deliveries = [
        item
        for item in read_topics(env.settings, ["deliveries"])
        if item.key == original.admission_key and isinstance(item.record, AdmitDelivery)
    ]
    assert {item.partition for item in deliveries} == {partition}


def test_rerun_of_an_unknown_run_produces_nothing(
    env: World, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _end(env.settings)
    code, out, err = run_cli(capsys, "runs", "rerun", "no-such-run", "--reason", "x")
    assert code == 1 and out == ""
    assert "no run 'no-such-run'" in err
    assert _end(env.settings) == before


def _end(settings: Settings) -> int:
    consumer = Consumer(settings.kafka_config(**{"group.id": "x"}))
    try:
        meta = consumer.list_topics(settings.topic_named("deliveries"), timeout=10)
        parts = meta.topics[settings.topic_named("deliveries")].partitions
        return sum(
            consumer.get_watermark_offsets(TopicPartition(settings.topic_named("deliveries"), p))[1]
            for p in parts
        )
    finally:
        consumer.close()
