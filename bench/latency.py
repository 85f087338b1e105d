"""Section 2, latency: webhook POST to ``RunAdmitted`` visible, beside a bare round trip.

``python -m bench.latency --runs 3 --out var/bench/latency.json``

Per run and offered rate (``BENCH_RATES``, default ``200,1000,5000`` deliveries/s), for
``BENCH_LATENCY_SECONDS`` (default 10) seconds each, open-loop: every send time is fixed in
advance (``start + i / rate``) and a latency is measured from that *scheduled* time, so a
sender that falls behind shows up as latency instead of hiding it (no coordinated omission).

- **Webhook**: a real ``sluicegate ingest`` (HTTP server) and one ``sluicegate processor``,
  as separate processes, on fresh topics; an aiohttp client posts distinct candles (each a
  new occurrence) to ``POST /v1/hooks/btc-breakout``; a read_committed consumer on ``runs``
  notes when each delivery's ``RunAdmitted`` arrives (matched by the delivery id the 202
  answered with).
- **Bare round trip**: a plain idempotent producer (acks=all) and a read_committed consumer
  on a topic of its own, the same rates and durations.

p50, p99 and p99.9 per rate (median of the runs, with min and max). A rate the sender could
not keep (its last record became visible more than 10% of the duration after the last
scheduled send, or a record never did) is marked as not sustained, with the rate at which
records became visible. The client, the consumers and the two servers share the machine's
cores, which at the highest rates is itself a limit (see the notes).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.request
import uuid
from pathlib import Path

import aiohttp
import orjson
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from bench import gate_latency
from bench.admission import load_note
from bench.backlog import (
    ROOT,
    Stage,
    candle,
    plan,
    start_child,
    stop_children,
    stop_on_sigterm,
)
from bench.cpu import CpuMeter, broker_pid, of_pid
from bench.latency_section import Measured, section
from bench.results import write
from bench.tails import Arrivals, behind_s, settle, tail, tail_consumer
from schemas.codec import decode
from schemas.events import RunAdmitted
from schemas.registry import get_registry
from schemas.topics import RUNS

ADMITTED_HEADER = get_registry().by_class[RunAdmitted].header
COUNTED = re.compile(r"counters: records=(\d+) \S+ batches=(\d+)")


def admitted_delivery(value: bytes) -> str | None:
    if value[: len(ADMITTED_HEADER)] != ADMITTED_HEADER:
        return None
    record = decode(value)
    assert isinstance(record, RunAdmitted)
    return record.delivery_id


# -- webhook ------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Servers:
    """``sluicegate ingest`` and ``sluicegate processor`` on a stage, as child processes."""

    def __init__(self, stage: Stage) -> None:
        self.port = free_port()
        env = {**os.environ, **stage.env(), "SLUICEGATE_READ_HTTP": "off"}
        self.children: list[subprocess.Popen[bytes]] = [
            start_child(
                stage,
                "ingest",
                ["ingest", "--http", f"127.0.0.1:{self.port}", "--read-http", "off"],
                env,
            ),
            start_child(stage, "processor", ["processor", "--instance-id", "latency-1"], env),
        ]
        self._processor_log = ROOT / "var" / "bench-logs" / f"{stage.prefix}processor.log"
        deadline = time.monotonic() + 60
        while not self._ready():
            if time.monotonic() > deadline:
                self.close()
                raise TimeoutError("sluicegate ingest was not ready within 60 s")
            time.sleep(0.2)

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=1) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def counters(self, timeout_s: float = 10.0) -> tuple[int, int] | None:
        """The processor's committed (transactions, input records) so far: it logs them when
        sent SIGUSR1. ``None`` if no answer came within ``timeout_s``."""
        seen = len(self._counted())
        self.children[1].send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = self._counted()
            if len(found) > seen:
                records, batches = found[seen]
                return int(batches), int(records)
            time.sleep(0.02)
        return None

    def _counted(self) -> list[tuple[str, str]]:
        """(records, batches) of every counters line the processor has logged so far."""
        found: list[tuple[str, str]] = COUNTED.findall(
            self._processor_log.read_text(errors="replace")
        )
        return found

    def close(self) -> None:
        stop_children(self.children)


async def post_all(port: int, bodies: list[bytes], rate: float) -> tuple[list[float], list[str]]:
    """Post ``bodies`` at ``rate``/s open-loop; (scheduled times, delivery ids: "" if refused)."""
    url = f"http://127.0.0.1:{port}/v1/hooks/btc-breakout?env=paper"
    connector = aiohttp.TCPConnector(limit=256)
    scheduled: list[float] = [0.0] * len(bodies)
    ids: list[str] = [""] * len(bodies)
    refusals: dict[int, int] = {}
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(i: int, body: bytes) -> None:
            # A refusal (503 when the broker ack takes too long, a dropped connection) is
            # counted, not raised: an overloaded rate is a result, not a crash.
            try:
                async with session.post(
                    url, data=body, headers={"Content-Type": "application/json"}
                ) as response:
                    answer = await response.read()
                    if response.status == 202:
                        ids[i] = orjson.loads(answer)["delivery_id"]
                    else:
                        refusals[response.status] = refusals.get(response.status, 0) + 1
            except (aiohttp.ClientError, TimeoutError):
                refusals[0] = refusals.get(0, 0) + 1

        start = time.monotonic() + 0.2
        tasks = []
        for i, body in enumerate(bodies):
            at = start + i / rate
            scheduled[i] = at
            delay = at - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(i, body)))
        await asyncio.gather(*tasks)
    if refusals:
        print(f"  webhook refusals by status (0: no answer): {refusals}", flush=True)
    return scheduled, ids


def candles(count: int, tag: str) -> list[bytes]:
    return [orjson.dumps(candle(f"lat-{tag}-{i:07d}")) for i in range(count)]


def webhook(
    stage: Stage, servers: Servers, rate: float, seconds: float, meter: CpuMeter | None = None
) -> Measured:
    count = max(1, int(rate * seconds))
    bodies = candles(count, uuid.uuid4().hex[:6])
    arrivals = Arrivals()
    consumer = tail_consumer(stage, stage.settings.topic(RUNS))
    thread = threading.Thread(target=tail, args=(consumer, arrivals, admitted_delivery))
    thread.start()
    cores: dict[str, float] | None = None
    before = after = None
    counted_s = 0.0
    try:
        if meter is not None:
            before = servers.counters()
            meter.start()
            counted_s = time.monotonic()
        scheduled, ids = asyncio.run(post_all(servers.port, bodies, rate))
        if meter is not None:
            cores = meter.cores()  # the sending, not the wait for stragglers below
            counted_s = time.monotonic() - counted_s
            after = servers.counters()
        settle(arrivals, {d for d in ids if d}, timeout_s=60)
        late = behind_s(arrivals, {d for d in ids if d}, scheduled[-1])
    finally:
        arrivals.stop.set()
        thread.join(10)
    latencies = sorted(
        (arrivals.seen[d] - at) * 1000
        for d, at in zip(ids, scheduled, strict=True)
        if d in arrivals.seen
    )
    refused = sum(1 for d in ids if not d)
    return Measured(
        rate,
        count,
        latencies,
        count - len(latencies),
        late,
        refused,
        cores,
        transactions=after[0] - before[0] if before and after else None,
        committed_records=after[1] - before[1] if before and after else None,
        counted_s=counted_s if before and after else None,
    )


# -- bare round trip ----------------------------------------------------------------------------


def bare(stage: Stage, rate: float, seconds: float) -> Measured:
    topic = f"{stage.prefix}bare-roundtrip"
    admin = AdminClient(stage.settings.kafka_config())
    existing = admin.list_topics(timeout=10).topics
    if topic not in existing:
        for future in admin.create_topics(
            [NewTopic(topic, num_partitions=stage.settings.partitions, replication_factor=1)]
        ).values():
            future.result()
        time.sleep(1)  # let the new partitions elect their leader before timing anything
    count = max(1, int(rate * seconds))
    producer = Producer(
        stage.settings.producer_config(
            **{"enable.idempotence": True, "acks": "all", "linger.ms": 2}
        )
    )
    arrivals = Arrivals()
    consumer = tail_consumer(stage, topic)
    thread = threading.Thread(target=tail, args=(consumer, arrivals, bytes.decode))
    thread.start()
    tag = uuid.uuid4().hex[:6]
    names = [f"{tag}-{i}" for i in range(count)]
    scheduled = [0.0] * count
    try:
        start = time.monotonic() + 0.2
        for i, name in enumerate(names):
            at = start + i / rate
            scheduled[i] = at
            delay = at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            producer.produce(topic, key=name.encode(), value=name.encode())
            producer.poll(0)
        producer.flush(30)
        settle(arrivals, set(names), timeout_s=30)
        late = behind_s(arrivals, set(names), scheduled[-1])
    finally:
        arrivals.stop.set()
        thread.join(10)
    latencies = sorted(
        (arrivals.seen[n] - at) * 1000
        for n, at in zip(names, scheduled, strict=True)
        if n in arrivals.seen
    )
    return Measured(rate, count, latencies, count - len(latencies), late)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.latency", description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("var/bench/latency.json"))
    args = parser.parse_args(argv)
    stop_on_sigterm()
    rates = [float(r) for r in os.environ.get("BENCH_RATES", "200,1000,5000").split(",") if r]
    seconds = float(os.environ.get("BENCH_LATENCY_SECONDS", "10"))
    gate_rate = float(os.environ.get("BENCH_GATE_RATE", "100"))
    webhook_runs: list[list[Measured]] = []
    bare_runs: list[list[Measured]] = []
    gate_runs: list[Measured] = []
    loads: list[str] = []
    for run in range(args.runs):
        print(f"latency run {run + 1} of {args.runs}", flush=True)
        loads.append(load_note(run))
        stage = Stage(int(os.environ.get("BENCH_PARTITIONS", "6")))
        servers: Servers | None = None
        gate: gate_latency.GateProcess | None = None
        try:
            stage.produce(dataclasses.replace(plan(1, 0.0), deliveries=[]))  # the workflow only
            servers = Servers(stage)
            gate = gate_latency.GateProcess(stage)
            webhook(stage, servers, 50, 1)  # warm-up: group joined, workflow table read
            webhook_runs.append([])
            bare_runs.append([])
            ingest, processor = (child.pid for child in servers.children)
            meter = CpuMeter(
                {
                    "ingest": of_pid(ingest),
                    "processor": of_pid(processor),
                    "gate": of_pid(gate.child.pid),
                    "broker": of_pid(broker_pid()),
                    "benchmark process": of_pid(os.getpid()),
                }
            )
            for rate in rates:
                for kind, measured in (
                    ("webhook", webhook(stage, servers, rate, seconds, meter)),
                    ("bare", bare(stage, rate, seconds)),
                ):
                    (webhook_runs if kind == "webhook" else bare_runs)[-1].append(measured)
                    print(f"  {kind} {rate:,.0f}/s: {measured.summary()}", flush=True)
            if gate_rate > 0:  # BENCH_GATE_RATE=0 leaves the gate out
                gate_latency.measure(stage, 20, 1, f"w{run}")  # warm-up
                gate_runs.append(gate_latency.measure(stage, gate_rate, seconds, f"r{run}"))
                print(f"  gate {gate_rate:,.0f}/s: {gate_runs[-1].summary()}", flush=True)
        finally:
            if gate is not None:
                gate.close()
            if servers is not None:
                servers.close()
            stage.close()
    rendered = section(webhook_runs, bare_runs, seconds, gate_runs, os.cpu_count() or 1)
    write(dataclasses.replace(rendered, notes=rendered.notes + loads), args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
