"""Section 5 of ``make bench``: recovery (restore, clean restart, memory with retained state).

For each size, one admission deployment (its own topic prefix, one partition) gets a
changelog of that many admission records, written as the processor writes them
(``bench/changelog.py``: real states of the example workflow, encoded by the real codec, with
their timers, uncompressed, in committed transactions; the timers are set far in the future
so that nothing fires while measuring).
Then, ``--runs`` times, a real admission processor (``sluicegate.bootstrap``) is started as a
child process:

1. with its state directory wiped: the time its assignment took to restore every record
   into an empty store (the processor's own ``restore_seconds``), the records restored
   (checked: exactly the changelog's), its RSS (``/proc/<pid>/status``, the largest of
   samples over :data:`SETTLE_S` after the restore) and the largest RSS sampled while it
   restored (every :data:`RESTORE_SAMPLE_S`: what a memory limit must leave room for);
2. stopped with SIGTERM (a clean close leaves checkpoints) and started again: the time that
   clean restart's assignment took and the records it restored (checked: 0).

Scale (environment): ``BENCH_RESTORE_RECORDS`` (default 1,000,000) the size whose restore is
timed, ``BENCH_RSS_RECORDS`` (default ``1000000,5000000``) the sizes whose RSS is compared.
A smoke run: ``BENCH_RESTORE_RECORDS=100000 BENCH_RSS_RECORDS=100000,300000``.

``python -m bench.recovery --runs 3 --out docs/benchmarks/recovery.json``; topics and state
directories are deleted at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka.admin import AdminClient

from bench.backlog import OutcomeCounter, plan, produce_backlog
from bench.changelog import (
    DISTINCT_STATES,
    RECORDS_PER_TRANSACTION,
    admission_records,
    produce_changelog,
)
from bench.cpu import cpu_seconds
from bench.results import Section, Series, Table, Target, spread, write
from streams.settings import Settings, load_settings

SETTLE_S = 3.0
ADMIT_TIMEOUT_S = 600.0
ADMIT_DELIVERIES = 50_000
"""New deliveries (25% repeats) each clean restart admits on top of the retained records."""
RESTORE_SAMPLE_S = 0.05
"""How often RSS is sampled while the processor restores (its largest is what a memory limit
on the process must leave room for)."""
REST_CORES = 0.1
"""A processor using less CPU than this over a whole second is at rest (RocksDB's compaction
of what the restore wrote, which runs in the first seconds after a large one, has finished)."""
REST_WAIT_S = 60.0
RESTORE_TARGET_S = 10.0
RSS_SPREAD = 0.20
STATE_ROOT = Path("var/bench-state")


RESTORE_PROFILE = (
    "py-spy (--native, 100 Hz) of restoring 1,000,000 records with the Restorer alone, "
    "5.75 s at load average 6 on 2 cores, 2026-12-01 (on the compressed changelog of one "
    "repeated state this section built until 2026-12-03); share of the restore's samples: "
    "RocksDB write batches 42% (memtable skip-list inserts and key comparisons; flushes and "
    "compactions run on RocksDB's own threads beside it), Consumer.consume 35% (one Python "
    "message object per record: Message_new0, headers), the Python loop putting keys and "
    "values into the write batch 19%, the rest librdkafka and glibc. Deferring compaction "
    "until the restore ends cut its CPU time from 4.4 s to 3.1 s in one trial; set aside "
    "then because reads would have met up to 140 level-0 files after a 5,000,000-record "
    "restore, adopted on 2026-12-05 with one compaction of the whole store at the end "
    "(PartitionStore.bulk_load), which leaves none."
)

RSS_DIAGNOSIS = (
    "A restore compacts nothing until it ends and then compacts the whole store once "
    "(streams/engine/store.py, PartitionStore.bulk_load), so no compaction runs in the 3 s "
    "the target samples and RSS then is RSS at rest. What separates the sizes is the block "
    "cache: the index and filter pieces of the files a restore's compaction writes are "
    "cached as it writes them, about 2.2 MiB for 1,000,000 records and 11 MiB for 5,000,000 "
    "with 32 KiB data blocks, 14 MiB for 20,000,000 (stores written directly, 2026-12-05); "
    "the cache's cap is 32 MiB. Until 2026-12-05 (4 KiB data blocks, and the pieces of the "
    "files the compaction deleted left in the cache) that was 16.0 MiB and the full 31.9 "
    "MiB: 71 and 93 MiB, +31%. Under load both sizes fill the cache with data blocks: the "
    "RSS after admitting is about the same at both. The rest (Python, librdkafka, thread "
    "stacks, 29 MiB of shared libraries) does not depend on the state. Tried and not "
    "adopted: a 16 MiB cache cap (71 and 76 MiB with the 4 KiB blocks, but admission on top "
    "of 5,000,000 records 4% slower), no compaction readahead (inside the noise)."
)


@dataclass
class Size:
    """The measurements of one deployment of ``records`` changelog records."""

    records: int
    built_s: float = 0.0
    restore_s: list[float] = field(default_factory=list)
    rss_mib: list[float] = field(default_factory=list)
    restart_s: list[float] = field(default_factory=list)
    restart_records: list[int] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)
    rest_rss_mib: list[float] = field(default_factory=list)
    """RSS once the processor was at rest (:data:`REST_CORES`); not measured: empty."""
    restoring_rss_mib: list[float] = field(default_factory=list)
    """The largest RSS sampled while the processor restored; not measured: empty."""
    admit_rate: list[float] = field(default_factory=list)
    """Deliveries/s a clean restart admitted on top of the retained records; not measured:
    empty."""
    admit_rss_mib: list[float] = field(default_factory=list)
    """RSS once that restart had admitted them; not measured: empty."""


def env_for(settings: Settings) -> dict[str, str]:
    return {
        **os.environ,
        "SLUICEGATE_TOPIC_PREFIX": settings.topic_prefix,
        "SLUICEGATE_PARTITIONS": "1",
        "SLUICEGATE_STATE_DIR": str(settings.state_dir),
    }


def deployment(records: int) -> Settings:
    prefix = f"bench-rec-{uuid.uuid4().hex[:8]}."
    return load_settings(
        {
            "SLUICEGATE_TOPIC_PREFIX": prefix,
            "SLUICEGATE_PARTITIONS": "1",
            "SLUICEGATE_STATE_DIR": str(STATE_ROOT / prefix),
        }
    )


def build(settings: Settings, size: Size) -> None:
    from streams.kafka.topics import ensure_topics

    ensure_topics(settings)
    started = time.monotonic()
    written = produce_changelog(
        settings,
        settings.topic_named("admission-changelog"),
        0,
        admission_records(size.records, far_future=True),
    )
    size.built_s = time.monotonic() - started
    assert written == size.records


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def largest_rss(child: subprocess.Popen[str], seconds: float) -> float:
    """The largest of ``child``'s RSS sampled every 0.1 s for ``seconds``."""
    peak = 0.0
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        if child.poll() is not None:
            raise RuntimeError(f"the processor stopped ({child.returncode}); see its log")
        peak = max(peak, rss_mib(child.pid))
        time.sleep(0.1)
    return peak


def wait_at_rest(child: subprocess.Popen[str]) -> bool:
    """Wait until ``child`` used less than :data:`REST_CORES` over a whole second (False:
    not within :data:`REST_WAIT_S`)."""
    give_up = time.monotonic() + REST_WAIT_S
    while time.monotonic() < give_up:
        before = cpu_seconds(child.pid)
        time.sleep(1.0)
        after = cpu_seconds(child.pid)
        if before is None or after is None:
            raise RuntimeError(f"the processor stopped ({child.poll()}); see its log")
        if after - before < REST_CORES:
            return True
    return False


@dataclass(frozen=True)
class ChildRun:
    """One processor start: what it reported and its RSS (MiB) while and after restoring."""

    report: dict[str, float]
    restoring: float
    """The largest RSS sampled from its start until it reported its assignment."""
    peak: float
    """The largest RSS in the :data:`SETTLE_S` after that."""
    at_rest: float | None
    """The largest RSS over :data:`SETTLE_S` once at rest; None: it never was."""
    admit_s: float | None = None
    """Seconds from its assignment until the outcomes it was to admit were visible."""
    admitted_rss: float | None = None
    """The largest RSS over :data:`SETTLE_S` once they were."""


def read_report(child: subprocess.Popen[str]) -> tuple[str, float]:
    """The child's report line and its largest RSS sampled until the line came."""
    assert child.stdout is not None
    largest = 0.0
    while True:
        readable, _, _ = select.select([child.stdout], [], [], RESTORE_SAMPLE_S)
        with contextlib.suppress(OSError, RuntimeError):  # it may exit between the two
            largest = max(largest, rss_mib(child.pid))
        if readable:
            return child.stdout.readline(), largest


def run_child(
    settings: Settings, *, memory: bool = True, admitting: OutcomeCounter | None = None
) -> ChildRun:
    """Start a processor, wait for its assignment, sample its RSS (:class:`ChildRun`; without
    ``memory``, stop it at once: ``peak`` is then 0 and ``at_rest`` None). With
    ``admitting``, first time it from its assignment until that counter has seen every
    outcome it waits for (the deliveries already on the topic)."""
    child = subprocess.Popen(
        [sys.executable, "-m", "bench.recovery", "--child"],
        env=env_for(settings),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line, restoring = read_report(child)
        if not line:
            raise RuntimeError(f"the processor exited ({child.wait()}) before its assignment")
        report: dict[str, float] = json.loads(line)
        admit_s = admitted_rss = None
        if admitting is not None:
            assigned = time.monotonic()
            admit_s = admitting.wait(ADMIT_TIMEOUT_S) - assigned
            admitted_rss = largest_rss(child, SETTLE_S)
        peak, at_rest = 0.0, None
        if memory:
            peak = largest_rss(child, SETTLE_S)
            at_rest = largest_rss(child, SETTLE_S) if wait_at_rest(child) else None
        child.send_signal(signal.SIGTERM)
        if child.wait(120) != 0:
            raise RuntimeError(f"the processor exited with {child.returncode}")
        return ChildRun(report, restoring, peak, at_rest, admit_s, admitted_rss)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def measure(settings: Settings, size: Size, runs: int, admit: int = 0) -> None:
    """``runs`` times a restore into an empty store, then a clean restart; then, with
    ``admit``, ``runs`` more clean restarts that each admit ``admit`` new deliveries (25%
    repeats) on top of the retained records, timed (after the restores, so that every
    restore reads exactly the changelog that was built)."""
    state = Path(settings.state_dir)
    for run in range(runs):
        shutil.rmtree(state, ignore_errors=True)
        first = run_child(settings)
        full, peak, at_rest = first.report, first.peak, first.at_rest
        if int(full["restored"]) != size.records:
            size.wrong.append(f"run {run}: restored {int(full['restored'])} of {size.records}")
        size.restore_s.append(full["seconds"])
        size.rss_mib.append(peak)
        size.restoring_rss_mib.append(first.restoring)
        if at_rest is not None:
            size.rest_rss_mib.append(at_rest)
        again = run_child(settings, memory=False).report
        size.restart_s.append(again["seconds"])
        size.restart_records.append(int(again["restored"]))
        if int(again["restored"]) != 0:
            size.wrong.append(f"run {run}: the clean restart restored {int(again['restored'])}")
        print(
            f"{size.records:,} records, run {run + 1}: restore {full['seconds']:.2f} s, "
            f"RSS {peak:.0f} MiB (at rest {at_rest or 0:.0f}, restoring "
            f"{first.restoring:.0f}), "
            f"clean restart {again['seconds']:.2f} s "
            f"({int(again['restored'])} records)",
            file=sys.stderr,
        )
    for run in range(runs if admit else 0):
        rate, rss = admitted(settings, size, admit, run)
        size.admit_rate.append(rate)
        size.admit_rss_mib.append(rss)
        print(
            f"{size.records:,} records retained, run {run + 1}: a clean restart admitted "
            f"{admit:,} deliveries at {rate:,.0f}/s, RSS then {rss:.0f} MiB",
            file=sys.stderr,
        )


def admitted(settings: Settings, size: Size, admit: int, run: int) -> tuple[float, float]:
    """Deliveries/s of a clean restart admitting ``admit`` new deliveries put on the topic
    just before it starts, and its RSS (MiB) once it had (a restart that restores anything is
    noted in ``size.wrong``)."""
    produce_backlog(settings, plan(admit, 0.25, tag=f"r{run}-"))
    # Every run's outcomes stay on the topic: this one's are the last ``admit`` of them.
    counter = OutcomeCounter(settings, admit * (run + 1))
    try:
        again = run_child(settings, memory=False, admitting=counter)
    finally:
        counter.close()
    if int(again.report["restored"]) != 0:
        size.wrong.append(f"admission run {run}: restored {int(again.report['restored'])}")
    assert again.admit_s is not None and again.admitted_rss is not None
    return admit / again.admit_s, again.admitted_rss


def child() -> int:
    """One admission processor that reports its assignment as a JSON line on stdout."""
    from sluicegate import bootstrap

    settings = load_settings()
    running = bootstrap.admission_processor(
        settings, instance_id="bench", batch_size=2000, commit_interval_ms=100
    )
    processor = running.processor
    signal.signal(signal.SIGTERM, lambda *_: processor.stop())
    thread = threading.Thread(target=processor.run, daemon=True)
    thread.start()
    while not processor.stats.assigned and thread.is_alive():
        time.sleep(0.02)
    if not thread.is_alive():
        return 1  # stopped before its assignment: its log says why
    stats = processor.stats
    print(
        json.dumps({"restored": stats.restored_records, "seconds": stats.restore_seconds}),
        flush=True,
    )
    while thread.is_alive():
        thread.join(0.2)
    running.workflows.close()
    return 0


def section(
    sizes: list[Size], restore_records: int, rss_records: list[int], load: str = ""
) -> Section:
    by = {s.records: s for s in sizes}
    rows: list[list[str | int | float]] = []
    for s in sizes:
        rows.append(
            [
                f"{s.records:,}",
                spread(s.restore_s).shown(2, " s"),
                f"{s.records / spread(s.restore_s).median:,.0f}",
                spread(s.restart_s).shown(2, " s"),
                f"{max(s.restart_records):,}",
                spread(s.rss_mib).shown(0, " MiB"),
                spread(s.rest_rss_mib).shown(0, " MiB") if s.rest_rss_mib else "-",
                spread(s.restoring_rss_mib).shown(0, " MiB") if s.restoring_rss_mib else "-",
                spread(s.admit_rate).shown(0) if s.admit_rate else "-",
                spread(s.admit_rss_mib).shown(0, " MiB") if s.admit_rss_mib else "-",
                "yes" if not s.wrong else "NO: " + "; ".join(s.wrong),
            ]
        )
    timed = by[restore_records]
    restore = spread(timed.restore_s)
    restart = spread(timed.restart_s)
    read_on_restart = max(max(s.restart_records) for s in sizes)
    small, large = by[min(rss_records)], by[max(rss_records)]
    rss_small, rss_large = spread(small.rss_mib).median, spread(large.rss_mib).median
    growth = rss_large / rss_small - 1
    targets = [
        Target(
            f"restore {restore_records:,} records into an empty store",
            f"<= {RESTORE_TARGET_S:.0f} s",
            restore.shown(2, " s"),
            restore.median <= RESTORE_TARGET_S and not timed.wrong,
            f"{restore.median / RESTORE_TARGET_S - 1:+.0%} against the limit",
        ),
        Target(
            "a clean restart restores only what it lacks",
            "0 records restored (local checkpoint)",
            f"{read_on_restart:,} records, {restart.shown(2, ' s')}",
            read_on_restart == 0,
            f"{restore.median / max(restart.median, 1e-3):.0f}x faster than a full restore",
        ),
        Target(
            f"RSS from {small.records:,} to {large.records:,} records",
            f"within {RSS_SPREAD:.0%}",
            f"{rss_small:.0f} MiB to {rss_large:.0f} MiB ({growth:+.0%})",
            abs(growth) <= RSS_SPREAD,
            f"{(RSS_SPREAD - abs(growth)) * 100:.0f} points of margin",
        ),
    ]
    return Section(
        order=5,
        title="Recovery",
        intro=(
            "An admission processor (one instance, one partition) restores its state from a "
            "changelog of admission records (real states of the example workflow, 854 bytes "
            f"each, {DISTINCT_STATES:,} distinct occurrences in turn, and their timers: half "
            "the records each) written as the processor writes them: uncompressed, in "
            f"committed transactions of {RECORDS_PER_TRANSACTION:,} records (about 480 bytes "
            "per record on the broker). Restore: the processor's assignment with an empty state "
            "directory. Clean restart: the same instance stopped with SIGTERM and started "
            "again, keeping its local store (a checkpoint of changelog offsets). RSS (the "
            f"target's): the largest of samples over {SETTLE_S:.0f} s after the restore, "
            "whatever RocksDB still does then (since 2026-12-05 a restore ends compacted). RSS "
            "at rest: the same, "
            f"once the processor used less than {REST_CORES:g} cores over a whole second. "
            "RSS while restoring: the largest of samples every "
            f"{RESTORE_SAMPLE_S * 1000:.0f} ms from the processor's start to its assignment "
            "(not a target; what a memory limit on the process must leave room for). Then "
            "admits: after those runs, as many clean restarts, each admitting "
            f"{ADMIT_DELIVERIES:,} new deliveries (25% repeats; `BENCH_RECOVERY_ADMIT`) put "
            "on the topic just before it started, timed from its assignment until the last "
            "outcome is visible read_committed, on top of the retained records (and the "
            "earlier runs' admissions): every delivery looks up its admission key among the "
            "retained records, so this shows whether a larger state slows admission (not a "
            "target; 2,635 to 5,768/s with "
            "2,000,000 records before the partitioned index, README). RSS after admitting: "
            f"the largest of samples over {SETTLE_S:.0f} s once that restart's outcomes were "
            "visible, with its block cache filled by lookups rather than by the restore (not "
            "a target)."
        ),
        tables=[
            Table(
                "Restore, clean restart and memory by retained records",
                [
                    "changelog records",
                    "restore into an empty store",
                    "records/s",
                    "clean restart",
                    "records read on clean restart",
                    "processor RSS",
                    "RSS at rest",
                    "RSS while restoring",
                    "then admits, deliveries/s",
                    "RSS after admitting",
                    "counts exact",
                ],
                rows,
            )
        ],
        notes=[
            "Before this release: about 33,000 records/s (200,000 in 6 s), every assignment "
            "wiped and restored everything, and RSS grew about 1.3 KiB per retained run "
            "(RocksDB defaults: index and filter blocks outside any cache, 64 MiB memtables, "
            "every file open).",
            "Memory now: one 32 MiB block cache per process holding data blocks (32 KiB "
            "each since 2026-12-05: alike states compress within a block, 18 MB of files per "
            "1,000,000 records instead of 75) and the 4 KiB pieces of the partitioned index "
            "and filters, the pieces and blocks of files a compaction deleted erased from "
            "it with them (since 2026-12-05), memtables capped at 64 MiB per "
            "process, 256 open files per store "
            "(streams/engine/rocks.py); a restore of 100,000 records or more flushes its "
            "memtables and returns the heap it freed to the system before the processor "
            "starts (streams/engine/restore.py), so what is left in memtables does not depend "
            "on where RocksDB's last automatic flush fell; and glibc's mmap threshold is fixed at "
            "128 KiB (streams/engine/heap.py), so the large buffers of RocksDB's compactions "
            "and librdkafka's fetches leave the process when freed instead of staying in "
            "malloc's arenas (before that, RSS at the same size differed by up to 50 MiB "
            "between runs); while a store is open, what smaller blocks RocksDB's threads free "
            "is returned every second (streams/engine/heap.py, Release): 5,000,000 records, "
            "RSS 6 s after the restore 70 to 71 MiB with it and 79 to 83 without (3 "
            "interleaved pairs, 2026-12-04).",
            "Until 2026-12-03 this section restored a changelog of one repeated state, "
            "LZ4-compressed by the benchmark's producer (16 MB on the broker for 1,000,000 "
            "records instead of about 480 MB): 4.48 s for 1,000,000 records and 29.53 s for "
            "5,000,000 there. On a changelog as the processor writes it the same restore took "
            "30.2 and 30.9 s for 1,000,000 records: once the restore's prefetch queue had been "
            "full, librdkafka postponed each refill by its default fetch.queue.backoff.ms (1 s) "
            "although the queue drained in a tenth of that. The restore's reader now waits "
            "10 ms (streams/engine/restore.py).",
            f"Changelogs built at {', '.join(f'{s.records / s.built_s:,.0f}' for s in sizes)} "
            "records/s (not measured against a target).",
            *([f"Load average while measuring (1, 5, 15 min; 2 cores): {load}."] if load else []),
            *([] if abs(growth) <= RSS_SPREAD else ["What RSS grows with: " + RSS_DIAGNOSIS]),
            *(
                []
                if restore.median <= RESTORE_TARGET_S
                else [
                    f"What limits the restore (missed by {restore.median - RESTORE_TARGET_S:.1f}"
                    " s): " + RESTORE_PROFILE
                ]
            ),
        ],
        series=[
            Series(
                "recovery",
                "restore into an empty store (s)",
                [f"{s.records:,}" for s in sizes],
                [spread(s.restore_s).median for s in sizes],
                xlabel="changelog records",
                ylabel="seconds",
            ),
            Series(
                "recovery",
                "clean restart (s)",
                [f"{s.records:,}" for s in sizes],
                [spread(s.restart_s).median for s in sizes],
                xlabel="changelog records",
                ylabel="seconds",
            ),
        ],
        targets=targets,
    )


def delete_topics(settings: Settings) -> None:
    admin = AdminClient(settings.kafka_config())
    names = [n for n in admin.list_topics(timeout=10).topics if n.startswith(settings.topic_prefix)]
    if names:
        for future in admin.delete_topics(names, operation_timeout=60).values():
            with contextlib.suppress(Exception):
                future.result()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("docs/benchmarks/recovery.json"))
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child()
    restore_records = int(os.environ.get("BENCH_RESTORE_RECORDS", "1000000"))
    rss_records = [
        int(n) for n in os.environ.get("BENCH_RSS_RECORDS", "1000000,5000000").split(",")
    ]
    admit = int(os.environ.get("BENCH_RECOVERY_ADMIT", str(ADMIT_DELIVERIES)))
    sizes: list[Size] = []
    for records in sorted({restore_records, *rss_records}):
        settings = deployment(records)
        size = Size(records)
        try:
            build(settings, size)
            measure(settings, size, args.runs, admit)
        finally:
            delete_topics(settings)
            shutil.rmtree(settings.state_dir, ignore_errors=True)
        sizes.append(size)
    load = ", ".join(f"{n:.1f}" for n in os.getloadavg())
    write(section(sizes, restore_records, rss_records, load), args.out)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
