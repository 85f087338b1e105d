"""make bench, section 4: the projector live and rebuilding, beside a bare COPY of the rows.

Run from the repository root::

    .venv/bin/python -m bench.projection --runs 3 --out docs/benchmarks/projection.json

One history, made by the real admission and gate cores (``tests/support/history.py``), is
written once under a unique topic prefix (6 partitions, transactions of 1,000 records, as a
backlog). Each run then measures, side by side on those records:

1. the live projector (``Projector``, its default batch) catching up into a fresh schema;
2. ``projections rebuild`` (``projections.rebuild.rebuild``: fresh schema, swap);
3. a bare ``COPY ... FROM STDIN`` of the rebuilt tables' rows (read back as COPY text before
   the clock starts) into a freshly migrated schema with the same indexes, in one
   transaction: what PostgreSQL alone takes for these rows.

Every contender's table row counts are checked against the pure model of the history
(``tests/support/memory_projection.py``); a run whose counts differ is reported as failed.
With ``py-spy`` installed (``pip install py-spy``), one more catch-up of the live projector and
one more rebuild run under it, and their top frames go into the notes.

Then, per run, keep-up runs (``bench/keepup.py``): one processor admitting a backlog with
the live projector beside it (and with two projectors sharing the partitions), its lag
sampled: whether the projection keeps up.

Scale (environment): ``BENCH_PROJECTION_OCCURRENCES`` (default 6,600: about 193,000 records;
200 takes a minute), ``BENCH_EVENTS_PER_DELIVERY`` (default 5, issue 12's figure for what
admission writes per delivery), ``BENCH_KEEPUP_DELIVERIES`` (default 60,000; 0 skips the
keep-up runs), ``BENCH_KEEPUP_PROJECTORS`` (default ``1,2``: the keep-up runs with one live
projector and with two sharing the partitions, interleaved). Topics and schemas are deleted
at the end.
"""

from __future__ import annotations

import argparse
import io
import itertools
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

from psycopg import sql

from bench import keepup
from bench.backlog import plan
from bench.projection_report import Run, Setting, section, top_frames
from bench.results import write
from projections.db import connect, drop_schema, schema_name
from projections.handlers import Source, project
from projections.migrate import migrate
from projections.model import TABLES
from projections.projector import Projector
from projections.rebuild import rebuild
from schemas.codec import encode
from schemas.commands import AdmitDelivery
from streams.kafka.clients import transactional_producer
from streams.kafka.topics import ensure_topics
from streams.settings import Settings, load_settings
from tests.support.history import Emitted, build_history, cleanup
from tests.support.memory_projection import MemoryProjection

TABLE_NAMES = [spec.name for spec in TABLES]


def bench_settings() -> Settings:
    prefix = f"bench-proj-{uuid.uuid4().hex[:8]}."
    return load_settings(
        {
            **os.environ,
            "SLUICEGATE_TOPIC_PREFIX": prefix,
            "SLUICEGATE_PARTITIONS": "6",
            "SLUICEGATE_STATE_DIR": f"var/bench-state/{prefix}",
        }
    )


def produce(settings: Settings, history: list[Emitted], transaction: int = 1000) -> None:
    """Write ``history`` in order with one transactional producer."""
    producer = transactional_producer(
        settings,
        transactional_id=f"{settings.topic_prefix}bench-history",
        client_id="bench-history",
        tuning={"linger.ms": 5},
    )
    producer.init_transactions(30)
    for start in range(0, len(history), transaction):
        producer.begin_transaction()
        for event in history[start : start + transaction]:
            producer.produce(
                settings.topic_named(event.topic),
                key=event.key.encode(),
                value=encode(event.record),
            )
        producer.commit_transaction(60)


def model_counts(history: list[Emitted]) -> dict[str, int]:
    """Rows per table of the pure model of ``history`` (positions are stand-ins: only the
    event log and receipts are keyed by them, one row per record either way)."""
    memory = MemoryProjection()
    for i, event in enumerate(history):
        memory.apply(project(Source(event.topic, 0, i, event.key), event.record))
    return {name: len(memory.tables.get(name, {})) for name in TABLE_NAMES}


def table_counts(settings: Settings, schema: str) -> dict[str, int]:
    with connect(settings.pg_dsn, autocommit=True) as conn:
        counts = {}
        for name in TABLE_NAMES:
            row = conn.execute(
                sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(schema, name))
            ).fetchone()
            counts[name] = int(row[0]) if row else 0
        return counts


def differences(want: dict[str, int], got: dict[str, int], who: str) -> list[str]:
    return [f"{who} {t}: {got.get(t)} rows, model {n}" for t, n in want.items() if got.get(t) != n]


def read_rows(settings: Settings, schema: str) -> dict[str, bytes]:
    """Every projection table of ``schema`` as COPY text."""
    out: dict[str, bytes] = {}
    with connect(settings.pg_dsn, autocommit=True) as conn:
        for name in TABLE_NAMES:
            buffer = bytearray()
            with conn.cursor().copy(
                sql.SQL("COPY {} TO STDOUT").format(sql.Identifier(schema, name))
            ) as copy:
                for chunk in copy:
                    buffer += chunk
            out[name] = bytes(buffer)
    return out


def bare_copy(settings: Settings, schema: str, rows: dict[str, bytes]) -> float:
    """Seconds to COPY ``rows`` into a freshly migrated ``schema`` in one transaction."""
    with connect(settings.pg_dsn) as conn:
        drop_schema(conn, schema)
        conn.commit()
        migrate(conn, schema, settings.topic_prefix)
        started = time.monotonic()
        with conn.transaction():
            for name, data in rows.items():
                target = sql.Identifier(schema, name)
                with conn.cursor().copy(sql.SQL("COPY {} FROM STDIN").format(target)) as copy:
                    for at in range(0, len(data), 1 << 20):
                        copy.write(data[at : at + (1 << 20)])
        return time.monotonic() - started


def live(settings: Settings, schema: str) -> tuple[float, int]:
    """Seconds for the live projector to catch up into a fresh ``schema``; messages."""
    with connect(settings.pg_dsn, autocommit=True) as conn:
        drop_schema(conn, schema)
    with Projector(settings, schema=schema) as projector:
        projector.run_until({})  # migrated, connected and assigned: the clock measures projecting
        started = time.monotonic()
        projector.run_until(timeout_s=1800)
        return time.monotonic() - started, projector.stats.messages


def one_run(settings: Settings, want: dict[str, int], events: int) -> Run:
    live_schema = schema_name(settings.topic_prefix) + "__follow"
    live_s, live_n = live(settings, live_schema)
    problems = differences(want, table_counts(settings, live_schema), "live")
    if live_n != events:
        problems.append(f"live projected {live_n} records of {events}")
    # One process first, then the default: the rows the checks and the COPY read are the
    # default's.
    alone = rebuild(settings, stream=io.StringIO(), show_progress=False, timeout_s=1800, workers=1)
    result = rebuild(settings, stream=io.StringIO(), show_progress=False, timeout_s=1800)
    rebuilt = schema_name(settings.topic_prefix)
    problems += differences(want, table_counts(settings, rebuilt), "rebuild")
    for who, done in (("rebuild", result), ("rebuild in one process", alone)):
        if done.messages != events:
            problems.append(f"{who} projected {done.messages} records of {events}")
    rows = read_rows(settings, rebuilt)
    copy_schema = rebuilt + "__copy"
    copy_s = bare_copy(settings, copy_schema, rows)
    problems += differences(want, table_counts(settings, copy_schema), "COPY")
    return Run(
        events,
        live_s,
        result.seconds,
        copy_s,
        not problems,
        tuple(problems),
        rebuild_one_s=alone.seconds,
        workers=result.workers,
    )


def profiles(settings: Settings) -> dict[str, list[str]]:
    """Top frames of the live projector's catch-up and of a rebuild under py-spy."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        return {"(none)": ["py-spy is not installed: pip install py-spy"]}
    found: dict[str, list[str]] = {}
    env = dict(os.environ, SLUICEGATE_TOPIC_PREFIX=settings.topic_prefix)
    for what in ("live", "rebuild"):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "profile.txt"
            child = [sys.executable, "-m", "bench.projection_profile", what]
            done = subprocess.run(
                # --subprocesses: a rebuild's load runs in worker processes.
                [spy, "record", "-s", "-r", "200", "-f", "raw", "-o", str(out), "--", *child],
                env=env,
                capture_output=True,
                text=True,
                timeout=1800,
                check=False,
            )
            if done.returncode != 0 or not out.exists():
                found[what] = [f"py-spy failed: {done.stderr.strip()[-300:]}"]
                continue
            found[what] = top_frames(out.read_text().splitlines())
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="make bench, section 4: projection")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("docs/benchmarks/projection.json"))
    parser.add_argument("--no-profile", action="store_true", help="skip the py-spy profiles")
    args = parser.parse_args(argv)
    occurrences = int(os.environ.get("BENCH_PROJECTION_OCCURRENCES", "6600"))
    per_delivery = float(os.environ.get("BENCH_EVENTS_PER_DELIVERY", "5"))
    settings = bench_settings()
    try:
        history = build_history(random.Random(12), occurrences, tag="bench")
        kinds = Counter(type(e.record) for e in history)
        want = model_counts(history)
        ensure_topics(settings)
        produce(settings, history)
        runs: list[Run] = []
        for i in range(args.runs):
            run = one_run(settings, want, len(history))
            runs.append(run)
            print(
                f"run {i + 1}: live {run.events / run.live_s:,.0f}/s, rebuild "
                f"{run.events / run.rebuild_s:,.0f}/s, COPY {run.events / run.copy_s:,.0f}/s"
                + ("" if run.counts_ok else f" COUNTS WRONG: {run.problems}"),
                file=sys.stderr,
            )
        keepups = []
        keepup_n = int(os.environ.get("BENCH_KEEPUP_DELIVERIES", "60000"))
        counts = [int(n) for n in os.environ.get("BENCH_KEEPUP_PROJECTORS", "1,2").split(",")]
        if keepup_n > 0:
            backlog = plan(keepup_n, 0.25)
            partitions = int(os.environ.get("BENCH_PARTITIONS", "6"))
            for i, n in itertools.product(range(args.runs), counts):
                k = keepup.measure(backlog, partitions, 600, projectors=n)
                keepups.append(k)
                print(
                    f"keep-up {i + 1}, {n} projector(s): processor {k.rate:,.0f} deliveries/s, "
                    "lag growth "
                    f"{k.growth_per_s:+,.0f}/s of {k.written_per_s:,.0f}/s written, largest "
                    f"{k.max_lag:,}, caught up after {k.caught_up_s}",
                    file=sys.stderr,
                )
        found = {} if args.no_profile else profiles(settings)
        setting = Setting(
            events=len(history),
            deliveries=kinds[AdmitDelivery],
            rows=sum(want.values()),
            events_per_delivery=per_delivery,
            batch_size=Projector.DEFAULT_BATCH,
            rebuild_workers=max((r.workers for r in runs), default=1),
            profiles=found,
            cores=os.cpu_count() or 0,
        )
        write(section(setting, runs, keepups), args.out)
        print(f"wrote {args.out}", file=sys.stderr)
    finally:
        cleanup(settings)


if __name__ == "__main__":
    main()
