"""kill -9 drills of the admission processor: count runs, launches and outcomes afterwards.

A stream of deliveries (a quarter of them duplicates of earlier occurrences) is produced
while processor *processes* (``sluicegate processor``) are killed with SIGKILL and restarted,
or join and leave the group. Afterwards, read back with a read_committed consumer, there must
be exactly one ``RunAdmitted`` per admission key, exactly slots x runs ``BranchLaunched``, and
exactly one outcome per delivery.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from projections import queries
from projections.projector import Projector
from streams.engine.store import PartitionStore, state_key
from tests.support.admission import AdmissionHarness
from tests.support.admission_drill import (
    RESTORED_KEY,
    Stream,
    broker,
    plan,
    verify,
    write_changelog,
)
from tests.support.component_process import ROOT, ProcessorProcess
from tests.support.history import cleanup
from tests.support.kafka import wait_until

pytestmark = pytest.mark.drill


@pytest.fixture()
def drill_harness(tmp_path: Path) -> Iterator[AdmissionHarness]:
    harness = AdmissionHarness(partitions=6)
    harness.apply_workflow(branch_timeout="1h")  # no relaunches: the drill counts launches
    yield harness
    harness.close()


def test_ten_kill9_during_a_50k_stream_with_25_percent_duplicates(
    drill_harness: AdmissionHarness, tmp_path: Path
) -> None:
    bodies = plan(50_000, 0.25, seed=11)
    stream = Stream(drill_harness, bodies, rate=1_500)
    processor = ProcessorProcess(drill_harness.settings, "drill-1", tmp_path)
    processor.start()
    stream.thread.start()
    started = time.monotonic()
    while processor.kills < 10 or not stream.done.is_set():
        time.sleep(2.5)
        if processor.kills < 10:
            processor.kill9()  # SIGKILL: no clean shutdown, an open transaction is left behind
            processor.start()
    counts = verify(drill_harness, stream)
    processor.stop()
    elapsed = time.monotonic() - started
    print(f"\ndrill kill9: {counts}, kills={processor.kills}, {elapsed:.1f} s", file=sys.stderr)
    assert processor.kills >= 10
    assert counts["runs_admitted"] == len(stream.keys)


def test_a_second_instance_joins_and_one_leaves_mid_stream(
    drill_harness: AdmissionHarness, tmp_path: Path
) -> None:
    bodies = plan(20_000, 0.25, seed=12)
    stream = Stream(drill_harness, bodies, rate=1_500)
    first = ProcessorProcess(drill_harness.settings, "join-1", tmp_path)
    second = ProcessorProcess(drill_harness.settings, "join-2", tmp_path)
    first.start()
    stream.thread.start()
    time.sleep(4)
    second.start()  # joins: the group rebalances, partitions move with their state
    time.sleep(5)
    first.kill9()  # leaves without a goodbye: its partitions move after the session timeout
    stream.done.wait(120)
    counts = verify(drill_harness, stream)
    second.stop()
    print(f"\ndrill join/leave: {counts}", file=sys.stderr)
    assert counts["runs_admitted"] == len(stream.keys)

    # The read model agrees with the topics, and a rebuild from the topics verifies clean.
    settings = drill_harness.settings
    try:
        with Projector(settings) as projector:
            projector.run_until(timeout_s=120)
        with queries.reader(settings) as (conn, schema):
            stats = queries.get_stats(conn, schema)
        assert stats["deliveries"] == counts["deliveries"]
        assert stats["runs_admitted"] == counts["runs_admitted"]
        assert stats["branch_launches"] == counts["branch_launches"]
        assert sum(stats["duplicates"].values()) == counts["duplicates"]
        env = dict(os.environ, SLUICEGATE_TOPIC_PREFIX=settings.topic_prefix)
        verified = subprocess.run(
            [
                sys.executable,
                "-m",
                "sluicegate.cli",
                "projections",
                "rebuild",
                "--verify",
                "--no-progress",
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert verified.returncode == 0, verified.stdout + verified.stderr
    finally:
        cleanup(settings)


def test_instances_stopped_with_sigstop_past_both_timeouts_resume_and_rejoin(
    drill_harness: AdmissionHarness, tmp_path: Path
) -> None:
    """A stopped process (SIGSTOP: a debugger, a frozen VM, a swap storm) keeps its sockets
    and its open transaction but stops heartbeating. After the 6 s session timeout the group
    hands its partitions to the other instance; after the 10 s transaction timeout the broker
    aborts what it had open and bumps its producer epoch. When it resumes it is a zombie:
    nothing it decided may become visible, and it must find its way back on its own.

    ``stop-1`` stops itself with its first admission's transaction open (a failpoint right
    before the commit: its records and offsets are sent); ``stop-2`` is stopped from outside,
    wherever it is. Each is resumed only once the other has taken everything over."""
    bodies = plan(45_000, 0.25, seed=14)
    stream = Stream(drill_harness, bodies, rate=1_000)
    first = ProcessorProcess(
        drill_harness.settings,
        "stop-1",
        tmp_path,
        env={"SLUICEGATE_FAILPOINTS": "before_commit:RunAdmitted!stop"},
    )
    second = ProcessorProcess(drill_harness.settings, "stop-2", tmp_path)
    first.start()
    second.start()
    stream.thread.start()
    try:
        wait_until(first.stopped, timeout_s=60)
        since = second.log_size()
        wait_until(lambda: second.log_mentions(TOOK_ALL, after=since), timeout_s=90)
        first.resume()
        wait_until(lambda: first.log_mentions("assigned [", after=first.resumed_at), 60)
        since = first.log_size()
        second.pause()
        wait_until(lambda: first.log_mentions(TOOK_ALL, after=since), timeout_s=90)
        second.resume()
        wait_until(lambda: second.log_mentions("assigned [", after=second.resumed_at), 60)
        assert stream.done.wait(120)
        counts = verify(drill_harness, stream)
        assert first.alive() and second.alive(), "a resumed instance exited instead of rejoining"
        assert first.log_mentions("renewing the producer", after=0)
    finally:
        for p in (first, second):
            if p.alive():
                p.resume()
        first.stop()
        second.stop()
    print(f"\ndrill SIGSTOP: {counts}", file=sys.stderr)
    assert counts["runs_admitted"] == len(stream.keys)


TOOK_ALL = "assigned [0, 1, 2, 3, 4, 5]"


@pytest.mark.exclusive
def test_a_processor_rides_out_a_broker_restart(
    drill_harness: AdmissionHarness, tmp_path: Path
) -> None:
    """The broker stops (an upgrade, a crash, a host reboot) while a commit is due, and stays
    away for longer than the commit can wait: the transaction's outcome is unknown. The
    processor starts over in place, as a restart with the same ``--instance-id`` would (a new
    producer whose ``init_transactions``, retried until the broker answers, resolves that
    transaction; the group joined again; state restored from the changelog); it does not exit.

    The processor stops itself (a failpoint) with its first admission's records and offsets
    sent and the commit not yet asked for; the broker goes down; the processor resumes into
    the commit."""
    bodies = plan(40_000, 0.25, seed=15)
    stream = Stream(drill_harness, bodies, rate=1_000_000)  # a backlog, before the outage
    stream.thread.start()
    assert stream.done.wait(120)
    processor = ProcessorProcess(
        drill_harness.settings,
        "outage-1",
        tmp_path,
        env={"SLUICEGATE_FAILPOINTS": "before_commit:RunAdmitted!stop"},
    )
    processor.start()
    try:
        wait_until(processor.stopped, timeout_s=60)
        broker("down")
        try:
            processor.resume()
            wait_until(lambda: processor.log_mentions("starting over", after=0), timeout_s=90)
        finally:
            broker("up")
        counts = verify(drill_harness, stream)
        assert processor.alive(), "the processor exited instead of waiting for the broker"
    finally:
        processor.resume()
        processor.stop()
    assert processor.log_mentions("restarts=1 ", after=0)
    print(f"\ndrill broker restart: {counts}", file=sys.stderr)
    assert counts["runs_admitted"] == len(stream.keys)


RESTORE_RECORDS = 400_000
"""Changelog records (states and their timers) the broker-outage-mid-restore drill restores."""


@pytest.mark.exclusive
def test_a_processor_rides_out_a_broker_restart_in_the_middle_of_a_restore(
    drill_harness: AdmissionHarness, tmp_path: Path
) -> None:
    """The broker stops while a processor restores a large state and comes back: the store
    ends up holding every record of the changelog (the restore goes on, or starts over), the
    processor does not exit, and the backlog behind it is admitted exactly once.

    The processor is frozen (SIGSTOP) as soon as its store holds a first file, so the broker
    goes away mid-restore however fast this machine restores; it runs on, broker-less, while
    the broker starts again."""
    settings = drill_harness.settings
    written = write_changelog(settings, RESTORE_RECORDS)
    stream = Stream(drill_harness, plan(5_000, 0.25, seed=17), rate=1_000_000)
    stream.thread.start()
    assert stream.done.wait(120)
    processor = ProcessorProcess(settings, "restore-outage", tmp_path)
    processor.start()
    state = Path(settings.state_dir)
    try:
        wait_until(lambda: any(state.rglob("*.sst")), timeout_s=60, interval_s=0.01)
        processor.pause()
        assert not processor.log_mentions("restored", after=0), "restored before the outage"
        broker("down")
        try:
            processor.resume()
        finally:
            broker("up")
        counts = verify(drill_harness, stream)
        assert processor.alive(), "the processor exited instead of waiting for the broker"
        assert processor.log_mentions(f"restored {written} records", after=0)
    finally:
        processor.resume()
        processor.stop()
    store = PartitionStore(next(state.rglob("p0")), fresh=False)
    try:
        assert store.count(state_key(RESTORED_KEY)) == written // 2
    finally:
        store.close()
    print(f"\ndrill broker restart mid-restore: {written} records; {counts}", file=sys.stderr)
    assert counts["runs_admitted"] == len(stream.keys)


def test_admission_throughput_on_a_backlog(drill_harness: AdmissionHarness, tmp_path: Path) -> None:
    """Reports deliveries/s for a 20,000-delivery backlog (25% duplicates); asserts only
    exactly-once, never speed (the machine is shared)."""
    bodies = plan(20_000, 0.25, seed=13)
    stream = Stream(drill_harness, bodies, rate=1_000_000)
    stream.thread.start()
    assert stream.done.wait(120)
    processor = ProcessorProcess(drill_harness.settings, "bench-1", tmp_path)
    started = time.monotonic()
    processor.start()
    counts = verify(drill_harness, stream)
    elapsed = time.monotonic() - started
    processor.stop()
    print(
        f"\nadmission throughput: {counts['deliveries']} deliveries in {elapsed:.1f} s "
        f"(incl. process start and read-back) = {counts['deliveries'] / elapsed:.0f}/s; {counts}",
        file=sys.stderr,
    )
