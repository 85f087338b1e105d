"""kill -9 drills of the admission processor: count runs, launches and outcomes afterwards.

A stream of deliveries (a quarter of them duplicates of earlier occurrences) is produced
while processor *processes* (``sluicegate processor``) are killed with SIGKILL and restarted,
or join and leave the group. Afterwards, read back with a read_committed consumer, there must
be exactly one ``RunAdmitted`` per admission key, exactly slots x runs ``BranchLaunched``, and
exactly one outcome per delivery.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from projections import queries
from projections.projector import Projector
from schemas.codec import decode
from schemas.events import BranchLaunched, RunAdmitted
from streams.adapters.deliveries import DeliveryProducer
from streams.engine.store import PartitionStore, state_key, timer_key
from streams.kafka.clients import transactional_producer
from streams.settings import Settings
from tests.support.admission import OUTCOMES, AdmissionHarness, candle, delivery_for
from tests.support.drills import stopped
from tests.support.history import cleanup
from tests.support.kafka import read_topic, wait_until

pytestmark = pytest.mark.drill

ROOT = Path(__file__).resolve().parents[2]
SLOTS = 3


class ProcessorProcess:
    """``sluicegate processor`` as a child process we can SIGKILL, SIGSTOP and SIGCONT."""

    def __init__(
        self,
        settings: Settings,
        instance_id: str,
        log_dir: Path,
        env: dict[str, str] | None = None,
    ) -> None:
        self.settings = settings
        self.instance_id = instance_id
        self.log_path = log_dir / f"{instance_id}.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.kills = 0
        self.env = env or {}
        self.resumed_at = 0
        """The log's size when the process was last resumed."""

    def start(self) -> None:
        env = dict(os.environ)
        env.update(
            self.env,
            SLUICEGATE_TOPIC_PREFIX=self.settings.topic_prefix,
            SLUICEGATE_PARTITIONS=str(self.settings.partitions),
            SLUICEGATE_STATE_DIR=str(self.settings.state_dir),
        )
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "sluicegate.cli",
                    "processor",
                    "--instance-id",
                    self.instance_id,
                ],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=log,
            )

    def kill9(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)
        self.kills += 1

    def pause(self) -> None:
        """SIGSTOP: the process keeps its sockets and its open transaction, and says nothing."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        self.resumed_at = self.log_size()
        self.process.send_signal(signal.SIGCONT)

    def stopped(self) -> bool:
        assert self.process is not None
        return stopped(self.process.pid)

    def log_size(self) -> int:
        return self.log_path.stat().st_size

    def log_mentions(self, text: str, after: int) -> bool:
        """Whether the log holds ``text`` past its first ``after`` bytes."""
        with self.log_path.open("rb") as log:
            log.seek(after)
            return text.encode() in log.read()

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def plan(total: int, duplicate_share: float, seed: int) -> list[dict[str, object]]:
    """``total`` delivery bodies; ``duplicate_share`` of them repeat an earlier occurrence."""
    rng = random.Random(seed)
    distinct = int(total * (1 - duplicate_share))
    bodies = [candle(event_id=f"evt-{i:06d}") for i in range(distinct)]
    out: list[dict[str, object]] = []
    originals = iter(bodies)
    sent: list[dict[str, object]] = []
    while len(out) < total:
        if sent and (len(sent) >= distinct or rng.random() < duplicate_share):
            out.append(rng.choice(sent))
        else:
            body = next(originals)
            sent.append(body)
            out.append(body)
    return out


class Stream:
    """Produces the planned deliveries at a steady pace from a background thread."""

    def __init__(self, harness: AdmissionHarness, bodies: list[dict[str, object]], rate: int):
        self.harness = harness
        self.bodies = bodies
        self.rate = rate
        self.delivery_ids: list[str] = []
        self.keys: set[str] = set()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        workflow = self.harness.table.lookup("btc-breakout", "paper")
        assert workflow is not None
        producer = DeliveryProducer(self.harness.settings, client_id="drill")
        started = time.monotonic()
        for n, body in enumerate(self.bodies):
            delivery = delivery_for(
                workflow,
                body,
                delivery_id=f"d-{n:06d}",
                received_at_ms=int(time.time() * 1000),
                channel="publish",
            )
            producer.send(delivery)
            self.delivery_ids.append(delivery.delivery_id)
            self.keys.add(delivery.admission_key)
            ahead = (n + 1) / self.rate - (time.monotonic() - started)
            if ahead > 0:
                time.sleep(ahead)
        producer.flush(60)
        self.done.set()


def verify(harness: AdmissionHarness, stream: Stream, timeout_s: float = 240) -> dict[str, int]:
    """Wait for every delivery's outcome, then count everything; assert exactly-once."""
    settings = harness.settings
    expected = len(stream.delivery_ids)

    def outcome_count() -> bool:
        return count_outcomes(settings) >= expected

    wait_until(outcome_count, timeout_s=timeout_s, interval_s=2.0)
    runs = [decode(m.value() or b"") for m in read_topic(settings, settings.topic_named("runs"))]
    tasks = [decode(m.value() or b"") for m in read_topic(settings, settings.topic_named("tasks"))]
    outcomes = Counter(r.delivery_id for r in runs if isinstance(r, OUTCOMES))
    admitted = Counter(r.admission_key for r in runs if isinstance(r, RunAdmitted))
    launches = Counter((t.run_id, t.slot) for t in tasks if isinstance(t, BranchLaunched))

    assert set(outcomes) == set(stream.delivery_ids), "a delivery lost its outcome"
    assert set(outcomes.values()) == {1}, "a delivery got more than one outcome"
    assert set(admitted) == stream.keys, "an occurrence was not admitted"
    assert set(admitted.values()) == {1}, "an occurrence was admitted twice"
    assert len(launches) == SLOTS * len(admitted) and set(launches.values()) == {1}
    return {
        "deliveries": expected,
        "outcomes": sum(outcomes.values()),
        "runs_admitted": sum(admitted.values()),
        "branch_launches": sum(launches.values()),
        "duplicates": expected - sum(admitted.values()),
    }


def count_outcomes(settings: Settings) -> int:
    return sum(
        1
        for m in read_topic(settings, settings.topic_named("runs"))
        if decode(m.value() or b"").__class__ in OUTCOMES
    )


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


RESTORED_KEY = "drill-restored/"
"""The prefix of the occurrences the restore drill's changelog holds (none is ever decided)."""


def write_changelog(settings: Settings, records: int) -> int:
    """``records`` admission changelog records in partition 0, in committed transactions of
    1,000 as the processor writes them: states of occurrences no delivery names (opaque
    bytes: a restore copies them, nothing decodes them) and their timers, ten years ahead."""
    producer = transactional_producer(
        settings, transactional_id=f"{settings.topic_prefix}drill-changelog", client_id="drill"
    )
    producer.init_transactions(30)
    topic = settings.topic_named("admission-changelog")
    due = int(time.time() * 1000) + 10 * 365 * 86_400_000
    value = random.Random(5).randbytes(850)
    for start in range(0, records, 1000):
        producer.begin_transaction()
        for n in range(start, min(start + 1000, records)):
            key = f"{RESTORED_KEY}{n // 2}"
            record = state_key(key) if n % 2 == 0 else timer_key(due, key)
            while True:
                try:
                    producer.produce(
                        topic, key=record.encode(), value=value if n % 2 == 0 else b"", partition=0
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.commit_transaction(60)
    return records


def broker(command: str) -> None:
    """``scripts/kafka/kafka.sh down|up``: the local broker, stopped or started again (its
    data stays)."""
    subprocess.run(["bash", str(ROOT / "scripts" / "kafka" / "kafka.sh"), command], check=True)


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
