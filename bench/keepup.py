"""Section 1's keep-up run: the live projector beside one processor admitting a backlog.

Issue 12 asks that the live projector keep up with the processor's sustained rate, its lag
bounded during the admission benchmark. This runs what a deployment runs: one ``sluicegate
processor`` admitting a backlog and one ``sluicegate projector`` projecting what it writes
into PostgreSQL, as separate processes on the same machine, and samples every half second

- the outcomes the processor has made visible (read_committed), and
- the projector's lag: for the topics admission writes (``runs``, ``tasks``), the offsets
  between each partition's end and the next offset the projector stored in PostgreSQL (in
  the same transaction as its rows). A transaction marker takes an offset too, so a
  projector that is caught up shows at most one per partition.

It also reads the CPU the processor, the projector, every PostgreSQL process (autovacuum
included) and the local broker used until the last outcome became visible: what the
projector's share of the machine was, and who took the rest; and again once the projection
caught up: what projecting the whole backlog cost.

The lag is bounded when it stops growing while the processor still works
(:attr:`bench.projection_report.KeepUp.bounded`). Section 4 reports it; the processor's rate
here is not among section 1's timed runs (the projector takes CPU the processor would
otherwise have).
"""

from __future__ import annotations

import subprocess
import time

import psycopg
from confluent_kafka import Consumer, TopicPartition
from psycopg import sql

from bench.backlog import Backlog, OutcomeCounter, Stage, start_child, stop_children
from bench.cpu import CpuMeter, broker_pid, of_pid, of_pids, postgres_cpu_seconds
from bench.projection_report import KeepUp, Sample
from projections.db import connect, drop_schema, schema_name
from schemas.topics import RUNS, TASKS
from streams.settings import Settings

PROJECTED = (RUNS, TASKS)
"""What admission writes that the projector reads (its changelog is not projected)."""
SAMPLE_S = 0.5
CATCH_UP_S = 180.0


def _ends(consumer: Consumer, settings: Settings) -> dict[tuple[str, int], int]:
    """End offset per (short topic name, partition), as the projector keys its offsets."""
    ends = {}
    for spec in PROJECTED:
        topic = settings.topic(spec)
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        for p in partitions:
            _low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            ends[(spec.name, p)] = high
    return ends


def _projected(conn: psycopg.Connection, schema: str) -> dict[tuple[str, int], int] | None:
    try:
        rows = conn.execute(
            sql.SQL("SELECT topic, partition, next_offset FROM {}.offsets").format(
                sql.Identifier(schema)
            )
        ).fetchall()
    except psycopg.errors.UndefinedTable:  # the projector has not migrated its schema yet
        return None
    return {(str(t), int(p)): int(o) for t, p, o in rows} if rows else None


def measure(backlog: Backlog, partitions: int, timeout_s: float, projectors: int = 1) -> KeepUp:
    """One keep-up run on fresh topics: ``projectors`` live projector processes, each with
    its share of the partitions (``--share K/N``) when more than one."""
    stage = Stage(partitions)
    schema = schema_name(stage.prefix)
    pg = connect(stage.settings.pg_dsn, autocommit=True)
    ends_reader = Consumer(
        stage.settings.kafka_config(
            **{"group.id": f"{stage.prefix}keepup-ends", "enable.auto.commit": False}
        )
    )
    children: list[subprocess.Popen[bytes]] = []
    counter: OutcomeCounter | None = None
    try:
        stage.produce(backlog)
        counter = OutcomeCounter(stage.settings, len(backlog.deliveries))
        started = time.monotonic()
        children.append(
            start_child(stage, "keepup-processor", ["processor", "--instance-id", "keepup"])
        )
        for k in range(projectors):
            share = [] if projectors == 1 else ["--share", f"{k}/{projectors}"]
            children.append(start_child(stage, f"keepup-projector-{k}", ["projector", *share]))
        meter = CpuMeter(
            {
                "processor": of_pid(children[0].pid),
                "projector": of_pids([c.pid for c in children[1:]]),
                "PostgreSQL": postgres_cpu_seconds,
                "broker": of_pid(broker_pid()),
            }
        )
        meter.start()
        cpu_s: dict[str, float] = {}
        cpu_caught_s: dict[str, float] = {}
        cpu_over_s = 0.0
        samples: list[Sample] = []
        admitted_at: float | None = None
        caught_at: float | None = None
        deadline = started + timeout_s
        while time.monotonic() < deadline:
            time.sleep(SAMPLE_S)
            now = time.monotonic()
            if admitted_at is None and counter.reached_at is not None:
                admitted_at = counter.reached_at
                cpu_s = meter.seconds()  # within one sample (0.5 s) of the last outcome
                cpu_over_s = time.monotonic() - meter.started
            projected = _projected(pg, schema)
            lag = None
            ends = _ends(ends_reader, stage.settings)
            if projected is not None:
                lag = sum(max(end - projected.get(tp, 0), 0) for tp, end in ends.items())
            samples.append(Sample(now - started, counter.count, lag))
            if admitted_at is not None:
                if lag is not None and lag <= len(ends):
                    caught_at = now
                    cpu_caught_s = meter.seconds()
                    break
                if now - admitted_at > CATCH_UP_S:
                    break
            if any(child.poll() is not None for child in children):
                raise RuntimeError(
                    f"a keep-up process exited early (logs: var/bench-logs/{stage.prefix}*)"
                )
        if admitted_at is None:
            raise TimeoutError(f"admission did not finish within {timeout_s:.0f} s")
        return KeepUp(
            deliveries=len(backlog.deliveries),
            admitted_s=admitted_at - started,
            samples=samples,
            caught_up_s=None if caught_at is None else caught_at - admitted_at,
            written=sum(_ends(ends_reader, stage.settings).values()),
            cpu_s=cpu_s,
            cpu_over_s=cpu_over_s,
            cpu_caught_s=cpu_caught_s,
            projectors=projectors,
        )
    finally:
        if counter is not None:
            counter.close()
        stop_children(children)
        ends_reader.close()
        with pg:
            drop_schema(pg, schema)
        stage.close()
