"""Section 2, latency: webhook POST to ``RunAdmitted`` visible, beside a bare round trip.

``python -m bench.latency --runs 3 --out docs/benchmarks/latency.json``

Per run and offered rate (``BENCH_RATES``, default ``200,1000,5000`` deliveries/s), open-loop:
every send time is fixed in advance (``start + i / rate``) and a latency is measured from that
*scheduled* time, so a sender that falls behind shows up as latency instead of hiding it (no
coordinated omission). Each rate is sent for long enough to give ``BENCH_LATENCY_SAMPLES``
(default 5,000) records, at least ``BENCH_LATENCY_MIN_SECONDS`` (5) and at most
``BENCH_LATENCY_SECONDS`` (10) seconds (:func:`bench.latency_tables.window_s`): 10 s at
200/s (2,000 records), 5 s at 1,000/s and at 5,000/s. Until 2026-12-04 every rate ran
10 s; the higher rates' extra records sharpened percentiles that 5,000 records already
give, and cost about 2 of the benchmark's minutes.

- **Webhook**: a real ``sluicegate ingest`` (HTTP server) and one ``sluicegate processor``,
  as separate processes, on fresh topics; a lean keep-alive client (:mod:`bench.http_client`)
  posts distinct candles (each a new occurrence) to ``POST /v1/hooks/btc-breakout``; a
  read_committed consumer on ``runs`` notes when each delivery's ``RunAdmitted`` arrives
  (matched by the delivery id the 202 answered with); the client notes when each answer
  arrived, so the tables split a rate's latency into the front door's part and the rest.
- **Bare round trip**: a plain idempotent producer (acks=all) and a read_committed consumer
  on a topic of its own, the same rates and durations.
- **Exactly-once floor**: the same records sent through :mod:`bench.relay`, a bare
  transactional consume-produce loop in its own process that decides nothing, timed until
  its output is visible read_committed: what exactly-once itself costs on this broker.

- **Fewer partitions** (``BENCH_FEWER_PARTITIONS``, default 0: left out; ``1`` measures it):
  the webhook again, per run, on topics of that many partitions, at the rates up to
  1,000/s: a transaction writes to (and commits a marker in) every partition it touches, so
  this shows what the partition count costs latency on this broker. Off by default since
  2026-12-04: it took about 1.5 of the full benchmark's minutes, and on one partition the
  latencies overlapped those on six (README, changelog).

- **Profile** (``BENCH_PROFILE``, default 1; 0 leaves it out): after the timed runs, one
  more webhook run at ``BENCH_PROFILE_RATE`` (default 1,000/s, the target's rate) with py-spy
  on the ingest and the processor and the broker's CPU read per thread, and one counting the
  Kafka requests each server sends (:mod:`bench.latency_profile`); ``--profile-only`` does
  just those and replaces the profile notes of the section already in ``--out``.

p50, p99 and p99.9 per rate (median of the runs, with min and max). A rate the sender could
not keep (its last record became visible more than 10% of the duration after the last
scheduled send, or a record never did) is marked as not sustained, with the rate at which
records became visible. The client, the consumers and the two servers share the machine's
cores, which at the highest rates is itself a limit (see the notes).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import os
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from bench import gate_latency, relay
from bench.admission import load_note
from bench.backlog import (
    Stage,
    stop_on_sigterm,
)
from bench.cpu import of_pid
from bench.latency_profile import PROFILE_NOTE, profile_notes
from bench.latency_section import section
from bench.latency_tables import Measured, window_s
from bench.results import replace_notes, write
from bench.tails import Arrivals, behind_s, latencies_ms, settle, tail, tail_consumer
from bench.webhook import on_fewer_partitions, serving, webhook

# -- bare round trip and the exactly-once floor ----------------------------------------------


def create_topics(stage: Stage, names: list[str]) -> None:
    """Create the stage's topics ``names`` (full names) that do not exist yet."""
    admin = AdminClient(stage.settings.kafka_config())
    missing = [n for n in names if n not in admin.list_topics(timeout=10).topics]
    if not missing:
        return
    new = [
        NewTopic(n, num_partitions=stage.settings.partitions, replication_factor=1) for n in missing
    ]
    for future in admin.create_topics(new).values():
        future.result()
    time.sleep(1)  # let the new partitions elect their leader before timing anything


def round_trip(stage: Stage, send_to: str, watch: str, rate: float, seconds: float) -> Measured:
    """Produce distinct records to ``send_to`` at ``rate``/s for ``seconds``, open-loop
    (idempotent, acks=all, linger 2 ms), and time each until a read_committed consumer sees
    a record of the same value on ``watch``."""
    count = max(1, int(rate * seconds))
    producer = Producer(
        stage.settings.producer_config(
            **{"enable.idempotence": True, "acks": "all", "linger.ms": 2}
        )
    )
    arrivals = Arrivals()
    consumer = tail_consumer(stage, watch)
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
            producer.produce(send_to, key=name.encode(), value=name.encode())
            producer.poll(0)
        producer.flush(30)
        settle(arrivals, set(names), timeout_s=30)
        late = behind_s(arrivals, set(names), scheduled[-1])
    finally:
        arrivals.stop.set()
        thread.join(10)
    latencies = latencies_ms(arrivals, names, scheduled)
    return Measured(rate, count, latencies, count - len(latencies), late)


def bare(stage: Stage, rate: float, seconds: float) -> Measured:
    """The bare round trip: produced and consumed on one topic of its own."""
    topic = f"{stage.prefix}bare-roundtrip"
    create_topics(stage, [topic])
    return round_trip(stage, topic, topic, rate, seconds)


@contextlib.contextmanager
def relaying(stage: Stage) -> Iterator[None]:
    """The exactly-once floor's relay process (:mod:`bench.relay`) on ``stage``, warmed up
    (group joined, transactions initialised, a record relayed)."""
    create_topics(stage, [stage.settings.topic_named(t) for t in relay.topics()])
    process = relay.RelayProcess(stage)
    try:
        warm = round_trip(stage, *_relay_ends(stage), 20, 1)
        if warm.missing:
            raise RuntimeError(f"the relay did not warm up: {warm.summary()}")
        yield
    finally:
        process.close()


def relayed(stage: Stage, rate: float, seconds: float) -> Measured:
    """The exactly-once floor: through the relay (inside :func:`relaying`)."""
    return round_trip(stage, *_relay_ends(stage), rate, seconds)


def _relay_ends(stage: Stage) -> tuple[str, str]:
    names = relay.topics()
    return stage.settings.topic_named(names[0]), stage.settings.topic_named(names[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.latency", description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("docs/benchmarks/latency.json"))
    parser.add_argument(
        "--profile-only",
        action="store_true",
        help="only the profiled runs; replace the profile notes of the section in --out",
    )
    args = parser.parse_args(argv)
    stop_on_sigterm()
    partitions = int(os.environ.get("BENCH_PARTITIONS", "6"))
    window = functools.partial(
        window_s,
        longest=float(os.environ.get("BENCH_LATENCY_SECONDS", "10")),
        shortest=float(os.environ.get("BENCH_LATENCY_MIN_SECONDS", "5")),
        samples=int(os.environ.get("BENCH_LATENCY_SAMPLES", "5000")),
    )
    profile_rate = float(os.environ.get("BENCH_PROFILE_RATE", "1000"))
    if args.profile_only:
        notes = profile_notes(profile_rate, window(profile_rate), partitions)
        replace_notes(args.out, PROFILE_NOTE, notes)
        print("\n".join(notes))
        return 0
    rates = [float(r) for r in os.environ.get("BENCH_RATES", "200,1000,5000").split(",") if r]
    gate_rate = float(os.environ.get("BENCH_GATE_RATE", "100"))
    fewer = int(os.environ.get("BENCH_FEWER_PARTITIONS", "0"))
    webhook_runs: list[list[Measured]] = []
    bare_runs: list[list[Measured]] = []
    relay_runs: list[list[Measured]] = []
    fewer_runs: list[list[Measured]] = []
    gate_runs: list[Measured] = []
    loads: list[str] = []
    for run in range(args.runs):
        print(f"latency run {run + 1} of {args.runs}", flush=True)
        loads.append(load_note(run))
        with serving(partitions) as (stage, servers), relaying(stage):
            gate = gate_latency.GateProcess(stage)
            try:
                kinds = {"webhook": webhook_runs, "bare": bare_runs, "relay": relay_runs}
                for runs in kinds.values():
                    runs.append([])
                meter = servers.meter(gate=of_pid(gate.child.pid))
                for rate in rates:
                    for kind, measured in (
                        ("webhook", webhook(stage, servers, rate, window(rate), meter)),
                        ("bare", bare(stage, rate, window(rate))),
                        ("relay", relayed(stage, rate, window(rate))),
                    ):
                        kinds[kind][-1].append(measured)
                        print(f"  {kind} {rate:,.0f}/s: {measured.summary()}", flush=True)
                if gate_rate > 0:  # BENCH_GATE_RATE=0 leaves the gate out
                    gate_latency.measure(stage, 20, 1, f"w{run}")  # warm-up
                    gate_runs.append(
                        gate_latency.measure(stage, gate_rate, window(gate_rate), f"r{run}")
                    )
                    print(f"  gate {gate_rate:,.0f}/s: {gate_runs[-1].summary()}", flush=True)
            finally:
                gate.close()
        if fewer > 0:  # BENCH_FEWER_PARTITIONS=1 measures on one partition per topic
            fewer_runs.append(on_fewer_partitions(fewer, [r for r in rates if r <= 1000], window))
    rendered = section(
        webhook_runs,
        bare_runs,
        gate_runs,
        os.cpu_count() or 1,
        fewer=(fewer, fewer_runs) if fewer_runs else None,
        relay=relay_runs,
    )
    profiled = (
        profile_notes(profile_rate, window(profile_rate), partitions)
        if os.environ.get("BENCH_PROFILE", "1") != "0"
        else []
    )
    write(dataclasses.replace(rendered, notes=rendered.notes + loads + profiled), args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
