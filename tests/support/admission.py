"""An admission processor on the real broker, with a controllable clock, for tests and drills."""

from __future__ import annotations

import threading
import time
import tomllib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from bench.backlog import candle_open, received_at_ms
from schemas.codec import decode, encode
from schemas.commands import AdmitDelivery, AuthorizeRerun, ReportBranchCompleted
from schemas.events import (
    BranchLaunched,
    BranchRelaunched,
    DeliveryDeduplicated,
    DeliveryRejected,
    OccurrenceConflict,
    RunAdmitted,
    WorkflowRevised,
)
from streams.adapters.deliveries import DeliveryProducer, new_delivery_id
from streams.adapters.workflow_table import WorkflowTable
from streams.apps.admission import AdmissionApp
from streams.core.durations import parse_time
from streams.core.errors import Refusal
from streams.core.intake import intake
from streams.core.workflow import parse_workflow_file, revise, workflow_key
from streams.engine.processor import Processor
from streams.kafka.topics import ensure_topics
from streams.settings import Settings
from tests.support.kafka import read_topic, unique_settings, wait_until

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_WORKFLOW = ROOT / "examples" / "btc-breakout.toml"
OUTCOMES = (RunAdmitted, DeliveryDeduplicated, OccurrenceConflict, DeliveryRejected)
T0 = parse_time("2026-11-30T12:01:00Z")


def candle(**overrides: object) -> dict[str, object]:
    """The README's example delivery body; overrides replace fields (None removes one)."""
    body: dict[str, object] = {
        "source": "tradingview",
        "venue": "binance",
        "instrument": "BTCUSDT",
        "interval": "1m",
        "candle_open": "2026-11-30T12:00:00Z",
        "rule": "breakout-v1",
        "side": "buy",
        "price": "97000.5",
        "account": "acc-1",
    }
    for name, value in overrides.items():
        if value is None:
            body.pop(name, None)
        else:
            body[name] = value
    return body


def delivery_for(
    workflow: WorkflowRevised,
    body: Mapping[str, object],
    *,
    delivery_id: str,
    received_at_ms: int,
    channel: str = "publish",
) -> AdmitDelivery:
    """The front doors' ``AdmitDelivery`` for ``body`` (the test expects it to be accepted)."""
    taken = intake(
        body,
        workflow,
        delivery_id=delivery_id,
        received_at_ms=received_at_ms,
        channel=channel,
        now_ms=received_at_ms,
    )
    assert not isinstance(taken, Refusal), taken
    return taken


@dataclass
class Clock:
    # 12:02: candles A (12:00) and B (12:01) have closed; a later source time is in the future.
    now_ms: int = T0 + 60_000

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, ms: int) -> None:
        self.now_ms += ms

    def to_wall_clock(self) -> str:
        """Set to the wall clock (for processors that run as processes of their own, on it)
        and return the open of the candle that closed last, the one the test's deliveries
        are of: the fixed candle of :func:`candle` falls out of the example workflow's 7-day
        retention a week after it (``beyond_horizon``) on such processors."""
        self.now_ms = time.time_ns() // 1_000_000
        return candle_open(received_at_ms(self.now_ms))


@dataclass
class Outcomes:
    """Everything the processor committed on ``runs`` and ``tasks``, decoded."""

    runs: list[Any] = field(default_factory=list)
    tasks: list[Any] = field(default_factory=list)

    def of(self, kind: type) -> list[Any]:
        return [r for r in self.runs + self.tasks if isinstance(r, kind)]

    def outcome_for(self, delivery_id: str) -> list[Any]:
        return [r for r in self.runs if isinstance(r, OUTCOMES) and r.delivery_id == delivery_id]

    def launches_per_run(self) -> Counter[str]:
        return Counter(t.run_id for t in self.tasks if isinstance(t, BranchLaunched))


class AdmissionHarness:
    """Topics under a fresh prefix, workflows, deliveries, and processors in threads."""

    def __init__(self, partitions: int = 3) -> None:
        self.settings: Settings = unique_settings(partitions=partitions)
        ensure_topics(self.settings)
        self.clock = Clock()
        self.table = WorkflowTable(self.settings)
        self.deliveries = DeliveryProducer(self.settings, client_id="test")
        self._raw = Producer(self.settings.producer_config(**{"enable.idempotence": True}))
        self.processors: list[tuple[Processor[Any, Any, Any], threading.Thread]] = []
        self.sent = 0

    # -- workflows --------------------------------------------------------------------------

    def apply_workflow(self, path: Path = EXAMPLE_WORKFLOW, **changes: Any) -> WorkflowRevised:
        """Publish the file's first workflow (with ``changes`` to its TOML table)."""
        document = tomllib.loads(path.read_text())
        for dotted, value in changes.items():
            target = document["workflow"][0]
            *parents, leaf = dotted.split("__")
            for parent in parents:
                target = target[parent]
            target[leaf] = value
        (definition,) = parse_workflow_file(document)
        self.table.catch_up()
        current = self.table.get(definition.subscription, definition.environment)
        revised = revise(current, definition, self.clock())
        assert revised is not None, "the workflow did not change"
        self._raw.produce(
            self.settings.topic_named("workflows"),
            key=workflow_key(revised.subscription, revised.environment).encode(),
            value=encode(revised),
        )
        assert self._raw.flush(10) == 0
        self.table.catch_up()
        return revised

    # -- deliveries -------------------------------------------------------------------------

    def deliver(
        self,
        body: Mapping[str, object],
        *,
        subscription: str = "btc-breakout",
        environment: str = "paper",
    ) -> AdmitDelivery:
        workflow = self.table.lookup(subscription, environment)
        assert workflow is not None
        delivery = delivery_for(
            workflow,
            body,
            delivery_id=new_delivery_id(),
            received_at_ms=self.clock(),
            channel="publish",
        )
        self.send(delivery)
        return delivery

    def send(self, record: AdmitDelivery | AuthorizeRerun) -> None:
        self.deliveries.send(record)  # type: ignore[arg-type]
        self.deliveries.flush()
        self.sent += 1

    def report(self, report: object) -> None:
        self._raw.produce(
            self.settings.topic_named("branch-results"),
            key=report.admission_key.encode(),  # type: ignore[attr-defined]
            value=encode(report),
        )
        assert self._raw.flush(10) == 0

    def complete(self, launched: BranchLaunched | BranchRelaunched) -> ReportBranchCompleted:
        done = ReportBranchCompleted(
            run_id=launched.run_id,
            admission_key=launched.admission_key,
            slot=launched.slot,
            attempt=launched.attempt,
            worker="test",
            result_json="{}",
            completed_at_ms=self.clock(),
        )
        self.report(done)
        return done

    # -- processors -------------------------------------------------------------------------

    def start_processor(self, instance_id: str = "p1") -> Processor[Any, Any, Any]:
        processor: Processor[Any, Any, Any] = Processor(
            self.settings,
            AdmissionApp(self.settings, WorkflowTable(self.settings)),
            instance_id=instance_id,
            clock=self.clock,
            batch_size=200,
        )
        thread = threading.Thread(target=processor.run, daemon=True)
        thread.start()
        self.processors.append((processor, thread))
        return processor

    def stop_processors(self) -> None:
        for processor, thread in self.processors:
            processor.stop()
            thread.join(60)
        self.processors.clear()

    def restart_processor(self, instance_id: str = "p1") -> Processor[Any, Any, Any]:
        self.stop_processors()
        return self.start_processor(instance_id)

    # -- reading back -----------------------------------------------------------------------

    def outcomes(self) -> Outcomes:
        return Outcomes(
            runs=[
                decode(m.value() or b"")
                for m in read_topic(self.settings, self.settings.topic_named("runs"))
            ],
            tasks=[
                decode(m.value() or b"")
                for m in read_topic(self.settings, self.settings.topic_named("tasks"))
            ],
        )

    def wait_for(self, predicate: Any, timeout_s: float = 60.0) -> Outcomes:
        """Poll the committed outputs until ``predicate(outcomes)`` holds."""
        seen: list[Outcomes] = []

        def check() -> bool:
            seen.append(self.outcomes())
            return bool(predicate(seen[-1]))

        wait_until(check, timeout_s=timeout_s, interval_s=0.3)
        return seen[-1]

    def wait_for_outcomes(self, count: int, timeout_s: float = 60.0) -> Outcomes:
        return self.wait_for(
            lambda o: sum(isinstance(r, OUTCOMES) for r in o.runs) >= count, timeout_s
        )

    def close(self) -> None:
        self.stop_processors()
        self.table.close()
