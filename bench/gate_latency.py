"""Section 2's gate part: a dispatch request to ``ActionDispatched`` visible, read_committed.

A real ``sluicegate gate`` process runs on the stage. Each sample is its own decision scope
(account ``bench-<n>``), so nothing supersedes anything: its ``CandidateProposed`` is
produced half a second before its ``DispatchRequested`` (so the proposal is already decided
and the request is what completes the dispatch), both keyed by scope key on ``candidates``
exactly as admission writes them. Open-loop: request send times are fixed in advance, and the
latency runs from the scheduled request time until a read_committed consumer on ``actions``
sees the ``ActionDispatched`` (matched by its action id, the candidate id). Deadlines are a
minute after the wall-clock source time, so no sample expires.
"""

from __future__ import annotations

import threading
import time

from confluent_kafka import Producer

from bench.backlog import Stage, start_child, stop_children
from bench.latency_tables import Measured
from bench.tails import Arrivals, behind_s, id_reader, settle, tail, tail_consumer
from schemas.codec import encode
from schemas.events import ActionDispatched, CandidateProposed, DispatchRequested
from schemas.topics import ACTIONS, CANDIDATES
from tests.support.gate import request

LEAD_S = 0.5
WINDOW_MS = 60_000


def proposal(n: int, tag: str, source_time_ms: int) -> CandidateProposed:
    run_id = f"run-{tag}-{n:08d}"
    return CandidateProposed(
        candidate_id=f"{run_id}.entry",
        run_id=run_id,
        admission_key=f"btc-breakout/paper/tradingview/e:{tag}-{n}",
        scope_key=f"paper|account=bench-{tag}-{n}|instrument=BTCUSDT|side=buy",
        subscription="btc-breakout",
        environment="paper",
        kind="entry",
        side="buy",
        quantity="0.010",
        notional=None,
        limit_price="97000.5",
        max_slippage_bps="5",
        params_json='{"rule":"breakout-v1"}',
        protection_json='{"kind":"stop_loss","stop_price":"96000"}',
        notification_json=None,
        reassessment_of=None,
        venue="binance",
        instrument="BTCUSDT",
        account=f"bench-{tag}-{n}",
        generation="1",
        generation_kind="number",
        expires_at_ms=source_time_ms + WINDOW_MS,
        source_time_ms=source_time_ms,
        validity_source_time="candle_close",
        validity_window_ms=WINDOW_MS,
        clock_uncertainty_ms=250,
        workflow_revision=1,
        exit_window_ms=None,
        enqueued_at_ms=source_time_ms,
        dequeued_at_ms=source_time_ms,
        proposed_at_ms=source_time_ms,
    )


dispatched_action = id_reader(ActionDispatched, "action_id")


class GateProcess:
    def __init__(self, stage: Stage) -> None:
        self.child = start_child(stage, "gate", ["gate", "--instance-id", "bench-gate"])

    def close(self) -> None:
        stop_children([self.child])


def measure(stage: Stage, rate: float, seconds: float, tag: str) -> Measured:
    """Dispatch requests at ``rate``/s for ``seconds``, open-loop; their latencies."""
    count = max(1, int(rate * seconds))
    producer = Producer(
        stage.settings.producer_config(
            **{"enable.idempotence": True, "acks": "all", "linger.ms": 2}
        )
    )
    topic = stage.settings.topic(CANDIDATES)
    arrivals = Arrivals()
    consumer = tail_consumer(stage, stage.settings.topic(ACTIONS))
    thread = threading.Thread(target=tail, args=(consumer, arrivals, dispatched_action))
    thread.start()
    start = time.monotonic() + LEAD_S + 0.2
    wall = time.time() - time.monotonic()
    # Every send, in time order: (at, record, request index or -1 for a proposal).
    plan: list[tuple[float, CandidateProposed | DispatchRequested, int]] = []
    proposals = []
    for n in range(count):
        at = start + n / rate
        p = proposal(n, tag, int((at + wall) * 1000) - 1000)
        proposals.append(p)
        plan.append((at - LEAD_S, p, -1))
        plan.append((at, request(p, int((at + wall) * 1000)), n))
    plan.sort(key=lambda x: x[0])
    scheduled = [0.0] * count
    try:
        for at, record, index in plan:
            delay = at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            producer.produce(topic, key=record.scope_key.encode(), value=encode(record))
            producer.poll(0)
            if index >= 0:
                scheduled[index] = at
        producer.flush(30)
        wanted = {p.candidate_id for p in proposals}
        settle(arrivals, wanted, timeout_s=60)
        late = behind_s(arrivals, wanted, plan[-1][0])
    finally:
        arrivals.stop.set()
        thread.join(10)
    latencies = sorted(
        (arrivals.seen[p.candidate_id] - at) * 1000
        for p, at in zip(proposals, scheduled, strict=True)
        if p.candidate_id in arrivals.seen
    )
    return Measured(rate, count, latencies, count - len(latencies), late)
