"""What the admission processor's kill -9 drills share (``tests/drills/test_admission_drill.py``).

:class:`Stream` produces planned deliveries (:func:`plan`); :func:`verify` waits for every
outcome and asserts exactly-once; :func:`write_changelog` puts a large admission state on the
changelog; :func:`broker` stops and starts the local broker.
"""

from __future__ import annotations

import random
import subprocess
import threading
import time
from collections import Counter

from bench.backlog import candle_open, received_at_ms
from schemas.codec import decode
from schemas.events import BranchLaunched, RunAdmitted
from streams.adapters.deliveries import DeliveryProducer
from streams.engine.store import state_key, timer_key
from streams.kafka.clients import transactional_producer
from streams.settings import Settings
from tests.support.admission import OUTCOMES, AdmissionHarness, candle, delivery_for
from tests.support.alone import require_alone
from tests.support.component_process import ROOT
from tests.support.kafka import read_topic, wait_until

SLOTS = 3


def plan(total: int, duplicate_share: float, seed: int) -> list[dict[str, object]]:
    """``total`` delivery bodies; ``duplicate_share`` of them repeat an earlier occurrence."""
    rng = random.Random(seed)
    distinct = int(total * (1 - duplicate_share))
    # Its processors judge the horizon by the wall clock: the candle that closed last.
    opened = candle_open(received_at_ms())
    bodies = [candle(event_id=f"evt-{i:06d}", candle_open=opened) for i in range(distinct)]
    out: list[dict[str, object]] = []
    originals = iter(bodies)
    sent: list[dict[str, object]] = []
    while len(out) < total:
        if sent and (len(sent) >= distinct or rng.random() < duplicate_share):
            out.append(rng.choice(sent))
        else:
            body = next(originals)
            sent.append(body)
            out.append(body)
    return out


class Stream:
    """Produces the planned deliveries at a steady pace from a background thread."""

    def __init__(self, harness: AdmissionHarness, bodies: list[dict[str, object]], rate: int):
        self.harness = harness
        self.bodies = bodies
        self.rate = rate
        self.delivery_ids: list[str] = []
        self.keys: set[str] = set()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        workflow = self.harness.table.lookup("btc-breakout", "paper")
        assert workflow is not None
        producer = DeliveryProducer(self.harness.settings, client_id="drill")
        started = time.monotonic()
        for n, body in enumerate(self.bodies):
            delivery = delivery_for(
                workflow,
                body,
                delivery_id=f"d-{n:06d}",
                received_at_ms=int(time.time() * 1000),
                channel="publish",
            )
            producer.send(delivery)
            self.delivery_ids.append(delivery.delivery_id)
            self.keys.add(delivery.admission_key)
            ahead = (n + 1) / self.rate - (time.monotonic() - started)
            if ahead > 0:
                time.sleep(ahead)
        producer.flush(60)
        self.done.set()


def verify(harness: AdmissionHarness, stream: Stream, timeout_s: float = 240) -> dict[str, int]:
    """Wait for every delivery's outcome, then count everything; assert exactly-once."""
    settings = harness.settings
    expected = len(stream.delivery_ids)

    def outcome_count() -> bool:
        return count_outcomes(settings) >= expected

    wait_until(outcome_count, timeout_s=timeout_s, interval_s=2.0)
    runs = [decode(m.value() or b"") for m in read_topic(settings, settings.topic_named("runs"))]
    tasks = [decode(m.value() or b"") for m in read_topic(settings, settings.topic_named("tasks"))]
    outcomes = Counter(r.delivery_id for r in runs if isinstance(r, OUTCOMES))
    admitted = Counter(r.admission_key for r in runs if isinstance(r, RunAdmitted))
    launches = Counter((t.run_id, t.slot) for t in tasks if isinstance(t, BranchLaunched))

    assert set(outcomes) == set(stream.delivery_ids), "a delivery lost its outcome"
    assert set(outcomes.values()) == {1}, "a delivery got more than one outcome"
    assert set(admitted) == stream.keys, "an occurrence was not admitted"
    assert set(admitted.values()) == {1}, "an occurrence was admitted twice"
    assert len(launches) == SLOTS * len(admitted) and set(launches.values()) == {1}
    return {
        "deliveries": expected,
        "outcomes": sum(outcomes.values()),
        "runs_admitted": sum(admitted.values()),
        "branch_launches": sum(launches.values()),
        "duplicates": expected - sum(admitted.values()),
    }


def count_outcomes(settings: Settings) -> int:
    return sum(
        1
        for m in read_topic(settings, settings.topic_named("runs"))
        if decode(m.value() or b"").__class__ in OUTCOMES
    )


RESTORED_KEY = "drill-restored/"
"""The prefix of the occurrences the restore drill's changelog holds (none is ever decided)."""


def write_changelog(settings: Settings, records: int) -> int:
    """``records`` admission changelog records in partition 0, in committed transactions of
    1,000 as the processor writes them: states of occurrences no delivery names (opaque
    bytes: a restore copies them, nothing decodes them) and their timers, ten years ahead."""
    producer = transactional_producer(
        settings, transactional_id=f"{settings.topic_prefix}drill-changelog", client_id="drill"
    )
    producer.init_transactions(30)
    topic = settings.topic_named("admission-changelog")
    due = int(time.time() * 1000) + 10 * 365 * 86_400_000
    value = random.Random(5).randbytes(850)
    for start in range(0, records, 1000):
        producer.begin_transaction()
        for n in range(start, min(start + 1000, records)):
            key = f"{RESTORED_KEY}{n // 2}"
            record = state_key(key) if n % 2 == 0 else timer_key(due, key)
            while True:
                try:
                    producer.produce(
                        topic, key=record.encode(), value=value if n % 2 == 0 else b"", partition=0
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.commit_transaction(60)
    return records


def broker(command: str) -> None:
    """``scripts/kafka/kafka.sh down|up``: the local broker, stopped or started again (its
    data stays)."""
    require_alone(f"kafka.sh {command}")
    subprocess.run(["bash", str(ROOT / "scripts" / "kafka" / "kafka.sh"), command], check=True)
