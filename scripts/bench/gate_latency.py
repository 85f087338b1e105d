#!/usr/bin/env python3
"""The gate's decision latency: dispatch request produced -> ``ActionDispatched`` visible.

``python scripts/bench/gate_latency.py`` makes topics under a fresh prefix, runs one gate
instance (the real app on the exactly-once engine, wall clock, default 100 ms commit
interval) in this process, proposes ``--n`` fresh candidates on ``--scopes`` scopes and waits
until they are accepted, then produces their dispatch requests at a steady ``--rate`` per
second. A read_committed consumer on ``actions`` notes when each ``ActionDispatched``
becomes visible; the script prints p50/p90/p99/max in milliseconds from the produce call of
the request (one producer, ``linger.ms`` 0) to the consumer seeing the dispatch. Its topics
are deleted afterwards.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from confluent_kafka import Producer, TopicPartition  # noqa: E402

from schemas.codec import decode, encode  # noqa: E402
from schemas.events import ActionDispatched, CandidateAccepted  # noqa: E402
from schemas.topics import ACTIONS, CANDIDATES, GATE_DECISIONS  # noqa: E402
from streams.apps.gate import GateApp  # noqa: E402
from streams.engine.processor import Processor  # noqa: E402
from streams.kafka.clients import read_committed_consumer  # noqa: E402
from streams.kafka.topics import ensure_topics  # noqa: E402
from tests.support.gate import SCOPE, proposal, request  # noqa: E402
from tests.support.history import cleanup  # noqa: E402
from tests.support.kafka import unique_settings  # noqa: E402


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=600, help="dispatch requests measured")
    parser.add_argument("--rate", type=float, default=50.0, help="requests per second")
    parser.add_argument("--scopes", type=int, default=60, help="decision scopes used")
    args = parser.parse_args()

    settings = unique_settings(partitions=3)
    ensure_topics(settings)
    now = time.time_ns() // 1_000_000
    # Candidate i goes to scope i % scopes with generation i: each round below proposes one
    # newer entry per scope.
    proposals = [
        proposal(
            i,
            scope_key=f"{SCOPE}|b={i % args.scopes}",
            generation=str(i),
            source_time_ms=now,
            window_ms=3_600_000,
        )
        for i in range(1, args.n + 1)
    ]
    producer = Producer(settings.producer_config(**{"enable.idempotence": True, "linger.ms": 0}))
    gate: Processor[Any, Any, Any] = Processor(settings, GateApp(settings), instance_id="bench-1")
    runner = threading.Thread(target=gate.run, daemon=True)
    runner.start()

    seen: dict[str, float] = {}
    consumer = read_committed_consumer(settings, group_id=f"{settings.topic_prefix}bench")
    actions = settings.topic(ACTIONS)
    meta = consumer.list_topics(actions, timeout=10).topics[actions]
    consumer.assign([TopicPartition(actions, p, 0) for p in meta.partitions])
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            for msg in consumer.consume(500, timeout=0.05):
                if msg.error() is None and msg.value():
                    record = decode(msg.value() or b"")
                    if isinstance(record, ActionDispatched):
                        seen.setdefault(record.action_id, time.perf_counter())

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()

    # Round by round: each round proposes one newer candidate per scope and requests it, so
    # every request finds its candidate current and pending.
    latencies: list[float] = []
    produced: dict[str, float] = {}
    interval = 1.0 / args.rate
    rounds = [proposals[i : i + args.scopes] for i in range(0, len(proposals), args.scopes)]
    candidates, decisions = settings.topic(CANDIDATES), settings.topic(GATE_DECISIONS)
    checker = read_committed_consumer(settings, group_id=f"{settings.topic_prefix}bench-d")
    dmeta = checker.list_topics(decisions, timeout=10).topics[decisions]
    checker.assign([TopicPartition(decisions, p, 0) for p in dmeta.partitions])
    accepted: set[str] = set()
    for batch in rounds:
        for p in batch:
            producer.produce(candidates, key=p.scope_key.encode(), value=encode(p))
        producer.flush(30)
        wanted = {p.candidate_id for p in batch}
        deadline = time.monotonic() + 60
        while not wanted <= accepted:
            for msg in checker.consume(500, timeout=0.2):
                if msg.error() is None and msg.value():
                    record = decode(msg.value() or b"")
                    if isinstance(record, CandidateAccepted):
                        accepted.add(record.candidate_id)
            if time.monotonic() > deadline:
                raise SystemExit("candidates were not accepted within 60 s")
        next_at = time.perf_counter()
        for p in batch:
            wait = next_at - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            r = request(p, now)
            produced[p.candidate_id] = time.perf_counter()
            producer.produce(candidates, key=r.scope_key.encode(), value=encode(r))
            producer.poll(0)
            next_at += interval
        producer.flush(30)
    deadline = time.monotonic() + 60
    while len(seen) < len(produced) and time.monotonic() < deadline:
        time.sleep(0.1)
    stop.set()
    watcher.join(5)
    gate.stop()
    runner.join(60)
    consumer.close()
    checker.close()
    cleanup(settings)  # the bench's topics and schema
    for action_id, at in produced.items():
        if action_id in seen:
            latencies.append((seen[action_id] - at) * 1000)
    if len(latencies) != len(produced):
        print(f"only {len(latencies)} of {len(produced)} dispatches became visible")
    print(
        f"gate decision latency over {len(latencies)} requests at {args.rate:g}/s "
        f"({args.scopes} scopes): p50 {percentile(latencies, 0.5):.1f} ms, "
        f"p90 {percentile(latencies, 0.9):.1f} ms, p99 {percentile(latencies, 0.99):.1f} ms, "
        f"max {max(latencies):.1f} ms"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
