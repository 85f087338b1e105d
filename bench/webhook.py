"""Section 2's webhook side: a real ``sluicegate ingest`` and ``sluicegate processor`` posted to.

:class:`Servers` runs the two as child processes on a stage; :func:`post_all` posts distinct
candles open-loop at a fixed rate (every send time fixed in advance) and notes when each
answer came back; :func:`webhook` times each post from its scheduled send to its
``RunAdmitted`` visible to a read_committed consumer, and to its answer;
:func:`on_fewer_partitions` does it again on topics with fewer partitions.
"""

from __future__ import annotations

import asyncio
import contextlib
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
from collections.abc import Callable, Iterator, Mapping

import orjson

from bench.backlog import ROOT, Stage, candle, plan, start_child, stop_children
from bench.cpu import CpuMeter, Reader, broker_pid, of_pid, waits_of
from bench.http_client import KeepAliveClient, ProtocolError
from bench.latency_tables import WAIT_COLUMNS, Measured
from bench.tails import (
    Arrivals,
    behind_s,
    id_reader,
    latencies_ms,
    settle,
    tail,
    tail_consumer,
)
from schemas.events import RunAdmitted
from schemas.topics import RUNS

COUNTED = re.compile(r"counters: records=(\d+) \S+ batches=(\d+)")


admitted_delivery = id_reader(RunAdmitted, "delivery_id")


# -- webhook ------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Servers:
    """``sluicegate ingest`` and ``sluicegate processor`` on a stage, as child processes."""

    def __init__(self, stage: Stage, extra_env: Mapping[str, str] | None = None) -> None:
        """``extra_env``: more environment for both children (librdkafka debug, say)."""
        self.port = free_port()
        env = {**os.environ, **stage.env(), "SLUICEGATE_READ_HTTP": "off", **(extra_env or {})}
        self.children: list[subprocess.Popen[bytes]] = [
            start_child(
                stage,
                "ingest",
                ["ingest", "--http", f"127.0.0.1:{self.port}", "--read-http", "off"],
                env,
            ),
            start_child(stage, "processor", ["processor", "--instance-id", "latency-1"], env),
        ]
        self.logs = tuple(
            ROOT / "var" / "bench-logs" / f"{stage.prefix}{name}.log"
            for name in ("ingest", "processor")
        )
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
        found: list[tuple[str, str]] = COUNTED.findall(self.logs[1].read_text(errors="replace"))
        return found

    def meter(self, **others: Reader) -> CpuMeter:
        """A CPU meter of the ingest, the processor, the broker, this (benchmark) process
        and ``others``."""
        ingest, processor = (child.pid for child in self.children)
        return CpuMeter(
            {
                "ingest": of_pid(ingest),
                "processor": of_pid(processor),
                **others,
                "broker": of_pid(broker_pid()),
                "benchmark process": of_pid(os.getpid()),
            }
        )

    def wait_meter(self) -> CpuMeter:
        """A meter of the time the ingest's and the processor's main threads, the broker and
        this (benchmark) process waited, runnable, for a CPU (:data:`WAIT_COLUMNS`)."""
        ingest, processor = (child.pid for child in self.children)
        readers = (
            waits_of(ingest, main_thread=True),
            waits_of(processor, main_thread=True),
            waits_of(broker_pid()),
            waits_of(os.getpid()),
        )
        return CpuMeter(dict(zip(WAIT_COLUMNS, readers, strict=True)))

    def close(self) -> None:
        stop_children(self.children)


@dataclasses.dataclass(frozen=True)
class Posted:
    """What :func:`post_all` sent, per post: its scheduled send time, the delivery id the
    webhook answered with ("" if refused) and when the answer was read (monotonic s)."""

    scheduled: list[float]
    ids: list[str]
    answered: list[float]


async def post_all(port: int, bodies: list[bytes], rate: float) -> Posted:
    """Post ``bodies`` at ``rate``/s open-loop (:class:`bench.http_client.KeepAliveClient`:
    every request's bytes are prepared before the first is sent)."""
    client = KeepAliveClient("127.0.0.1", port)
    requests = [
        client.request("/v1/hooks/btc-breakout?env=paper", body, "application/json")
        for body in bodies
    ]
    scheduled: list[float] = [0.0] * len(bodies)
    ids: list[str] = [""] * len(bodies)
    answered: list[float] = [0.0] * len(bodies)
    refusals: dict[int, int] = {}

    async def one(i: int) -> None:
        # A refusal (503 when the broker ack takes too long, a dropped connection) is
        # counted, not raised: an overloaded rate is a result, not a crash.
        try:
            status, answer = await client.send(requests[i])
        except (OSError, ProtocolError):
            refusals[0] = refusals.get(0, 0) + 1
            return
        answered[i] = time.monotonic()
        if status == 202:
            ids[i] = orjson.loads(answer)["delivery_id"]
        else:
            refusals[status] = refusals.get(status, 0) + 1

    try:
        start = time.monotonic() + 0.2
        tasks = []
        for i in range(len(bodies)):
            at = start + i / rate
            scheduled[i] = at
            delay = at - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(i)))
        await asyncio.gather(*tasks)
    finally:
        client.close()
    if refusals:
        print(f"  webhook refusals by status (0: no answer): {refusals}", flush=True)
    return Posted(scheduled, ids, answered)


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
    waited: dict[str, float] | None = None
    waits = servers.wait_meter()  # read with ``meter``, when there is one
    before = after = None
    counted_s = 0.0
    try:
        if meter is not None:
            before = servers.counters()
            meter.start()
            waits.start()
            counted_s = time.monotonic()
        posted = asyncio.run(post_all(servers.port, bodies, rate))
        scheduled, ids = posted.scheduled, posted.ids
        if meter is not None:
            cores = meter.cores()  # the sending, not the wait for stragglers below
            waited = waits.cores()
            counted_s = time.monotonic() - counted_s
            after = servers.counters()
        settle(arrivals, {d for d in ids if d}, timeout_s=60)
        late = behind_s(arrivals, {d for d in ids if d}, scheduled[-1])
    finally:
        arrivals.stop.set()
        thread.join(10)
    latencies = latencies_ms(arrivals, ids, scheduled)
    refused = sum(1 for d in ids if not d)
    answered = sorted(
        (at_answer - at) * 1000
        for d, at, at_answer in zip(ids, scheduled, posted.answered, strict=True)
        if d
    )
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
        answered_ms=answered,
        waited=waited,
    )


@contextlib.contextmanager
def serving(
    partitions: int, extra_env: Mapping[str, str] | None = None
) -> Iterator[tuple[Stage, Servers]]:
    """Fresh topics of ``partitions`` partitions holding the example workflow, and
    :class:`Servers` on them (``extra_env`` for both), warmed up: group joined, workflow
    table read. Servers and topics are closed on the way out."""
    stage = Stage(partitions)
    servers: Servers | None = None
    try:
        stage.produce(dataclasses.replace(plan(1, 0.0), deliveries=[]))  # the workflow only
        servers = Servers(stage, extra_env)
        webhook(stage, servers, 50, 1)  # warm-up
        yield stage, servers
    finally:
        if servers is not None:
            servers.close()
        stage.close()


def on_fewer_partitions(
    partitions: int, rates: list[float], window: Callable[[float], float]
) -> list[Measured]:
    """The webhook measurement again on fresh topics of ``partitions`` partitions each, at
    ``rates``, each for ``window(rate)`` seconds: what the partitions a transaction touches
    cost its latency."""
    measured: list[Measured] = []
    with serving(partitions) as (stage, servers):
        meter = servers.meter()
        for rate in rates:
            measured.append(webhook(stage, servers, rate, window(rate), meter))
            print(
                f"  webhook, {partitions} partition(s) per topic, {rate:,.0f}/s: "
                f"{measured[-1].summary()}",
                flush=True,
            )
    return measured
