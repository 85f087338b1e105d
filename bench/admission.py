"""Section 1, admission throughput: Sluicegate beside the limit, Postgres and DBOS.

``python -m bench.admission --runs 3 --out docs/benchmarks/admission.json``

One backlog (``BENCH_DELIVERIES`` deliveries, default 200,000, ``BENCH_DUPLICATES`` of them
repeats, default 0.25; the example workflow's 3 slots) is planned and encoded once; every
contender of every run reads those same records. Per run, each on fresh topics or tables:

1. Sluicegate, 1 and 2 instances (``BENCH_INSTANCES``, default ``1,2``): the backlog is
   produced first; the clock starts when the ``sluicegate processor`` processes are started
   (so it includes their start-up and group join) and stops when a read_committed consumer
   has seen the last delivery's outcome. Then the topics are read back and the counts checked
   (one outcome per delivery, one ``RunAdmitted`` per occurrence, one ``BranchLaunched`` per
   run and slot); the first run also measures what admission wrote per delivery. Every run
   reads the CPU the processors and the local broker used meanwhile and how long the
   processors' loops waited for a core (:mod:`bench.cpu`). With
   ``BENCH_INTERPRETED=1``, where the core is compiled, one instance runs it from its Python
   source too (:mod:`bench.interpreted`), timed and checked the same way: about 36 s a run,
   off by default since 2026-12-04 to keep the whole benchmark within 20 minutes.
2. The limit (:mod:`bench.limit`), writing per input what admission wrote per delivery.
   Its mirror, the ceiling (:mod:`bench.core_alone`, a process of its own): the admission
   core and the engine's decider alone, on one thread, state in a dict, nothing sent; it
   reports its thread's CPU and wait over its loop.
3. Postgres ``INSERT ... ON CONFLICT DO NOTHING`` (:mod:`bench.pg_admission`): 1,000 per
   transaction, and one transaction per delivery from 4 connections on the first
   ``BENCH_PG_EACH_DELIVERIES`` (default 25,000) deliveries: the rate of a transaction per
   delivery does not depend on how many follow (side by side, 50,000 and 200,000 ran at
   1,288 to 1,549/s both), and the whole backlog took it 90 to 150 s of every run.
4. DBOS Transact (:mod:`bench.dbos_admission`) on the first ``BENCH_DBOS_DELIVERIES``
   (default 2,500) deliveries only: it is two orders of magnitude slower (86/s, so 29 s a
   run; 5,000 until 2026-12-04).

After the timed runs, one extra run of ``BENCH_PROFILE_DELIVERIES`` (50,000) deliveries by
one instance under py-spy (if installed; ``BENCH_PROFILE=0`` skips it) gives the note on
what limits it; ``--profile-only`` does just that run and replaces its note in ``--out``.

Other knobs: ``BENCH_PARTITIONS`` (default 6), ``BENCH_TIMEOUT_S`` per contender (600),
``BENCH_SKIP`` (comma-separated contender keys: ``limit,ceiling,pg,dbos``) for a quick look.
A contender whose counts are wrong is a failed run: its figure is left out and a note says so.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psycopg

from bench import limit, pg_admission
from bench.admission_section import (
    CEILING,
    DBOS,
    INTERPRETED,
    LIMIT,
    PG_BATCH,
    PG_EACH,
    SLUICEGATE_1,
    USAGE_KEYS,
    Results,
    section,
)
from bench.backlog import (
    ROOT,
    Backlog,
    OutcomeCounter,
    Stage,
    plan,
    read_all,
    start_child,
    stop_children,
    stop_on_sigterm,
)
from bench.counts import CountsWrong, counted, expect_outcomes
from bench.cpu import CpuMeter, broker_pid, of_pid, of_pids, summed, waits_of
from bench.profile import Profiler, available, top_frames
from bench.results import replace_notes, write
from schemas.topics import DELIVERIES, RUNS, TASKS, TOPICS, WORKFLOWS
from sluicegate import native

RAW_DIR = ROOT / "var" / "bench"
"""Where the raw results are kept (not committed): what ``--resume`` reads."""
# -- Sluicegate ---------------------------------------------------------------------------------


def sluicegate(
    backlog: Backlog,
    instances: int,
    partitions: int,
    timeout_s: float,
    *,
    interpreted: bool = False,
) -> tuple[Timed, Stage]:
    """The time from starting ``instances`` processors to the last outcome visible and what
    they used, and the stage to check and close (closed here if the run fails).
    ``interpreted``: the processors import the admission core from its Python source
    (``bench.interpreted``)."""
    stage = Stage(partitions)
    try:
        return _timed(stage, backlog, instances, timeout_s, interpreted=interpreted), stage
    except BaseException:
        stage.close()
        raise


@dataclasses.dataclass(frozen=True)
class Timed:
    seconds: float
    usage: dict[str, float]
    """:meth:`Results.add_cpu`'s figures (empty when a part could not be read)."""


def usage_of(seconds: float, instances: int, used: dict[str, float]) -> dict[str, float]:
    """:meth:`Results.add_cpu`'s figures from a meter's reading over ``seconds``, or none
    (empty) when a part every run must have could not be read (a processor already gone)."""
    usage = {"seconds": seconds, "instances": float(instances), **used}
    return usage if set(USAGE_KEYS) <= set(usage) else {}


def _meter(pids: list[int]) -> CpuMeter:
    broker = broker_pid()
    return CpuMeter(
        {
            "processor": of_pids(pids),
            "loop_waited": summed([waits_of(pid, main_thread=True) for pid in pids]),
            "broker": of_pid(broker),
        }
    )


def _timed(
    stage: Stage,
    backlog: Backlog,
    instances: int,
    timeout_s: float,
    profiled: list[str] | None = None,
    *,
    interpreted: bool = False,
) -> Timed:
    """``profiled``: a py-spy profile of the first instance is appended to it (raw stacks)."""
    stage.produce(backlog)
    counter = OutcomeCounter(stage.settings, len(backlog.deliveries))
    children: list[subprocess.Popen[bytes]] = []
    try:
        started = time.monotonic()
        for i in range(instances):
            children.append(
                start_child(
                    stage,
                    f"processor-{i}",
                    ["processor", "--instance-id", f"bench-{i}"],
                    module="bench.interpreted" if interpreted else "sluicegate.cli",
                )
            )
        meter = _meter([child.pid for child in children])
        meter.start()
        profiler = Profiler(children[0].pid) if profiled is not None else None
        try:
            reached = counter.wait(timeout_s)
            used = meter.seconds()  # within a few ms of the last outcome (the counter's thread)
            metered_s = time.monotonic() - meter.started
        finally:
            if profiler is not None and profiled is not None:
                profiled.append(profiler.stop())
        return Timed(reached - started, usage_of(metered_s, instances, used))
    finally:
        counter.close()
        stop_children(children)


def check_sluicegate(stage: Stage, backlog: Backlog) -> None:
    settings = stage.settings
    written = (
        value
        for topic in (settings.topic(RUNS), settings.topic(TASKS))
        for _p, _k, value in read_all(settings, topic)
    )
    expect_outcomes(*counted(written), backlog)


def written_per_delivery(stage: Stage, deliveries: int) -> list[limit.Output]:
    """What admission wrote, per output topic (short names), measured on the real topics."""
    skip = {DELIVERIES.name, WORKFLOWS.name}
    existing = set(stage_topics(stage))
    profile = []
    for spec in TOPICS:
        name = stage.settings.topic(spec)
        if spec.name in skip or name not in existing:
            continue
        records = keys = values = 0
        for _p, key, value in read_all(stage.settings, name):
            records += 1
            keys += len(key)
            values += len(value)
        if records:
            profile.append(
                limit.Output(spec.name, records, deliveries, keys // records, values // records)
            )
    return profile


def stage_topics(stage: Stage) -> list[str]:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(stage.settings.kafka_config())
    return [n for n in admin.list_topics(timeout=10).topics if n.startswith(stage.prefix)]


# -- the others ---------------------------------------------------------------------------------


def the_limit(
    backlog: Backlog, profile: list[limit.Output], partitions: int, timeout_s: float
) -> float:
    stage = Stage(partitions)
    try:
        stage.produce(backlog)
        outputs = [
            limit.Output(stage.prefix + o.topic, o.records, o.inputs, o.key_bytes, o.value_bytes)
            for o in profile
        ]
        seconds = limit.run(stage.settings, outputs, len(backlog.deliveries), timeout_s)
        for o in outputs:
            got = sum(1 for _ in read_all(stage.settings, o.topic))
            if got != o.records:
                raise CountsWrong(f"{o.topic}: {got} records, {o.records} expected")
        return seconds
    finally:
        stage.close()


def the_ceiling(backlog: Backlog, timeout_s: float) -> Timed:
    """The admission core alone (:mod:`bench.core_alone`), in a process of its own that reads
    the same records from a file and counts what it produced; what its loop used as
    :meth:`Results.add_cpu` takes it (no broker)."""
    with tempfile.TemporaryDirectory(prefix="bench-ceiling-") as folder:
        path = Path(folder) / "backlog.bin"
        backlog.save(path)
        command = [sys.executable, "-m", "bench.core_alone", "--backlog", str(path)]
        try:
            done = subprocess.run(
                command, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s, check=False
            )
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"bench.core_alone ran longer than {timeout_s:.0f} s") from None
    if done.returncode == 3:
        raise CountsWrong(done.stderr.strip())
    if done.returncode != 0:
        raise RuntimeError(f"bench.core_alone exited {done.returncode}: {done.stderr[-500:]}")
    spent = json.loads(done.stdout)
    used = {"processor": float(spent["cpu_seconds"])}
    if spent["waited_seconds"] is not None:
        used["loop_waited"] = float(spent["waited_seconds"])
    return Timed(float(spent["seconds"]), usage_of(float(spent["seconds"]), 1, used))


def postgres(backlog: Backlog, dsn: str, batched: bool) -> float:
    tables = pg_admission.Tables(dsn)
    try:
        slots = list(backlog.slots)
        if batched:
            seconds = pg_admission.batched(tables, backlog.deliveries, slots)
        else:
            seconds = pg_admission.per_delivery(tables, backlog.deliveries, slots)
        counts = tables.counts()
        occurrences = backlog.occurrences
        want = pg_admission.Counts(
            occurrences, occurrences * len(slots), len(backlog.deliveries), occurrences
        )
        if counts != want:
            raise CountsWrong(f"{counts} != {want}")
        return seconds
    finally:
        tables.close()


def dbos(backlog: Backlog, dsn: str) -> float:
    schema = f"bench_dbos_{uuid.uuid4().hex[:8]}"
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump([[d.admission_key, d.delivery_id] for d in backlog.deliveries], f)
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "bench.dbos_admission",
                dsn,
                schema,
                f.name,
                ",".join(backlog.slots),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(done.stderr[-2000:])
        result = json.loads(done.stdout.strip().splitlines()[-1])
        occurrences = backlog.occurrences
        if (
            result["handles"] != len(backlog.deliveries)
            or result["workflows"] != occurrences
            or result["launches"] != occurrences * len(backlog.slots)
        ):
            raise CountsWrong(f"DBOS counts {result}, {occurrences} occurrences expected")
        return float(result["seconds"])
    finally:
        Path(f.name).unlink(missing_ok=True)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE".encode())


def load_note(run: int) -> str:
    """The 1-minute load average as a run starts (the machine may be shared)."""
    one, five, _ = os.getloadavg()
    return f"Run {run + 1} started at a load average of {one:.1f} (5 min: {five:.1f})."


# -- the run ------------------------------------------------------------------------------------


def attempt(results: Results, name: str, deliveries: int, measure: object) -> None:
    """Run ``measure()`` (seconds, or :class:`Timed` with what the run used), record its
    rate (and its CPU) or why it failed; print what the run took in all (setup and count
    checks included), which is what the section's length is made of."""
    started = time.monotonic()
    try:
        measured = measure()  # type: ignore[operator]
    except (CountsWrong, TimeoutError, RuntimeError, psycopg.Error) as e:
        results.fail(name, f"{type(e).__name__}: {e}")
        return
    else:
        timed = measured if isinstance(measured, Timed) else Timed(float(measured), {})
        results.add(name, deliveries, timed.seconds)
        if timed.usage:
            results.add_cpu(name, timed.usage)
    finally:
        print(f"  {name}: the run took {time.monotonic() - started:.1f} s in all", flush=True)


PROFILE_NOTE = "What limits one instance"


def load_results(path: Path) -> Results:
    """The raw results a previous pass left in :data:`RAW_DIR` (``--resume``)."""
    raw = json.loads(path.read_text())
    return Results(
        rates=raw["rates"],
        failures=raw["failures"],
        deliveries=raw["deliveries"],
        profile=[limit.Output(**o) for o in raw["profile"]],
        notes=raw["notes"],
        cpu=raw.get("cpu", {}),  # raw results written before 2026-12-07 have none
    )


def profile_note(backlog: Backlog, partitions: int, timeout_s: float) -> str:
    """One extra, untimed Sluicegate run (1 instance) under py-spy; its top frames as text."""
    if not available():
        return "No profile: py-spy is not installed (pip install py-spy)."
    raw: list[str] = []
    stage = Stage(partitions)
    try:
        seconds = _timed(stage, backlog, 1, timeout_s, profiled=raw).seconds
    finally:
        stage.close()
    n = len(backlog.deliveries)
    return (
        f"{PROFILE_NOTE}: py-spy (100 Hz) on the processor during an extra run of "
        f"{n:,} deliveries ({n / seconds:,.0f}/s while sampled; not among the timed runs), top "
        "frames by share of samples (a compiled core's functions have no Python frame: their "
        "time is the self time of the app method that calls them, AdmissionApp.decide and "
        f".evolve):\n{top_frames(raw[0] if raw else '', root=str(ROOT))}"
    )


def measure(
    runs: int, results: Results | None = None
) -> tuple[Results, Backlog, dict[str, int | float]]:
    """``runs`` runs of every contender; given earlier ``results`` (``--resume``), only the
    contenders with fewer than ``runs`` good runs run again, until they have them."""
    total = int(os.environ.get("BENCH_DELIVERIES", "200000"))
    share = float(os.environ.get("BENCH_DUPLICATES", "0.25"))
    instances = [int(x) for x in os.environ.get("BENCH_INSTANCES", "1,2").split(",") if x]
    partitions = int(os.environ.get("BENCH_PARTITIONS", "6"))
    timeout_s = float(os.environ.get("BENCH_TIMEOUT_S", "600"))
    dbos_n = int(os.environ.get("BENCH_DBOS_DELIVERIES", "2500"))
    skip = set(os.environ.get("BENCH_SKIP", "").split(","))
    interpreted_too = os.environ.get("BENCH_INTERPRETED", "0") == "1"
    dsn = os.environ.get(
        "SLUICEGATE_PG_DSN", "postgresql://sluicegate:sluicegate@127.0.0.1:5432/sluicegate"
    )
    backlog = plan(total, share)
    first = backlog.first(dbos_n)
    pg_each = backlog.first(int(os.environ.get("BENCH_PG_EACH_DELIVERIES", "25000")))
    print(f"admission: {total:,} deliveries, {backlog.occurrences:,} occurrences", flush=True)
    results = results or Results()
    results.notes.append(
        f"The processors ran the admission core {native.mode()} (make install compiles it with "
        "mypyc; README, 'The compiled core')."
    )
    before = {name: len(rates) for name, rates in results.rates.items()}
    later = bool(results.rates)

    def wanted(name: str) -> bool:
        return len(results.rates.get(name, [])) < runs

    for run in range(runs):
        print(f"admission run {run + 1} of {runs}", flush=True)
        results.notes.append(("A later pass: " if later else "") + load_note(run))
        contenders = [
            (SLUICEGATE_1 if n == 1 else f"Sluicegate, {n} instances", n, False) for n in instances
        ]
        if interpreted_too and native.mode() == "compiled":
            contenders.append((INTERPRETED, 1, True))
        for name, n, interpreted in contenders:
            if not wanted(name):
                continue

            def one(n: int = n, interpreted: bool = interpreted) -> Timed:
                timed, stage = sluicegate(
                    backlog, n, partitions, timeout_s, interpreted=interpreted
                )
                try:
                    check_sluicegate(stage, backlog)
                    if not results.profile:
                        results.profile = written_per_delivery(stage, total)
                finally:
                    stage.close()
                return timed

            attempt(results, name, total, one)
        if "limit" not in skip and results.profile and wanted(LIMIT):
            attempt(
                results,
                LIMIT,
                total,
                lambda p=results.profile: the_limit(backlog, p, partitions, timeout_s),
            )
        if "ceiling" not in skip and wanted(CEILING):
            attempt(results, CEILING, total, lambda: the_ceiling(backlog, timeout_s))
        if "pg" not in skip and wanted(PG_EACH):
            attempt(
                results,
                PG_EACH,
                len(pg_each.deliveries),
                lambda: postgres(pg_each, dsn, batched=False),
            )
        if "pg" not in skip and wanted(PG_BATCH):
            attempt(results, PG_BATCH, total, lambda: postgres(backlog, dsn, batched=True))
        if "dbos" not in skip and wanted(DBOS):
            attempt(results, DBOS, len(first.deliveries), lambda: dbos(first, dsn))
    for name, count in before.items():
        if len(results.rates.get(name, [])) > count:
            results.notes.append(
                f"{name}: {len(results.rates[name]) - count} of its runs came from a later pass."
            )
    scale: dict[str, int | float] = {
        "deliveries": total,
        "duplicates": share,
        "occurrences": backlog.occurrences,
        "partitions": partitions,
        "dbos_deliveries": len(first.deliveries),
        "pg_each_deliveries": len(pg_each.deliveries),
        "runs": runs,
    }
    return results, backlog, scale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.admission", description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("docs/benchmarks/admission.json"))
    parser.add_argument(
        "--profile-only",
        action="store_true",
        help="only the profiled run; replace its note in the section already in --out",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="read the raw results (var/bench/<out name>.raw.json) and run only contenders "
        "short of --runs",
    )
    args = parser.parse_args(argv)
    stop_on_sigterm()
    if args.profile_only:
        backlog = plan(int(os.environ.get("BENCH_PROFILE_DELIVERIES", "50000")), 0.25)
        note = profile_note(backlog, int(os.environ.get("BENCH_PARTITIONS", "6")), 600)
        replace_notes(args.out, PROFILE_NOTE, [note])
        print(note)
        return 0
    raw = RAW_DIR / f"{args.out.stem}.raw.json"
    earlier = load_results(raw) if args.resume else None
    results, backlog, scale = measure(args.runs, earlier)
    profiled_before = any(n.startswith(PROFILE_NOTE) for n in results.notes)
    if os.environ.get("BENCH_PROFILE", "1") != "0" and not profiled_before:
        profiled = backlog.first(int(os.environ.get("BENCH_PROFILE_DELIVERIES", "50000")))
        results.notes.append(profile_note(profiled, int(scale["partitions"]), 600))
    raw.parent.mkdir(parents=True, exist_ok=True)
    raw.write_text(json.dumps(dataclasses.asdict(results), indent=1))
    write(section(results, scale), args.out)
    print(f"wrote {args.out} and {raw}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
