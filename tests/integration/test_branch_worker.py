"""The branch-worker SDK on the real broker: it reports claims, admission writes the facts."""

from __future__ import annotations

import threading
from collections import Counter
from decimal import Decimal

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from consumers.branch_worker import BranchWorker, Proposal, Task, demo_handler
from schemas.codec import decode
from schemas.commands import ReportBranchCompleted, ReportBranchStarted
from schemas.events import (
    ActionDispatched,
    BranchCompleted,
    BranchFailed,
    BranchLaunched,
    BranchSkipped,
    BranchStarted,
    RunAdmitted,
    RunStatusChanged,
)
from schemas.topics import ACTIONS, BRANCH_RESULTS, TASKS
from sluicegate.commands.worker import worker_probes
from streams.apps.gate import GateApp
from streams.engine.processor import Processor
from tests.support.admission import AdmissionHarness, candle
from tests.support.kafka import read_topic, wait_until
from tests.support.prometheus import Page

pytestmark = pytest.mark.integration


def test_a_worker_claims_and_admission_accepts_each_result_once(harness: AdmissionHarness) -> None:
    seen: list[Task] = []

    def handler(task: Task) -> dict[str, object] | Proposal:
        seen.append(task)
        return demo_handler(task)

    worker = BranchWorker(harness.settings, handler, deadline_slots=[], name="sdk-test")
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        harness.start_processor()
        harness.deliver(candle())
        out = harness.wait_for(
            lambda o: any(
                isinstance(r, RunStatusChanged) and r.status == "completed" for r in o.runs
            )
        )
    finally:
        worker.stop()
        thread.join(30)
    slots = {"analysis", "signal", "journal"}
    assert {t.slot for t in seen} == slots
    assert {e.slot for e in out.of(BranchStarted)} == slots
    completed = out.of(BranchCompleted)
    assert sorted(e.slot for e in completed) == sorted(slots)
    assert {e.worker for e in completed} == {"sdk-test"}
    claims = [
        decode(m.value() or b"")
        for m in read_topic(harness.settings, harness.settings.topic(BRANCH_RESULTS))
    ]
    assert {type(c) for c in claims} == {ReportBranchStarted, ReportBranchCompleted}
    assert len(claims) == 2 * len(slots)
    metrics = worker_probes(worker).metrics()  # what GET /metrics answers
    assert metrics is not None
    page = Page(metrics)
    assert page.value("sluicegate_worker_tasks_handled_total", worker="sdk-test") == 3
    reports = {dict(k)["report"]: v for k, v in page.all("sluicegate_worker_reports_total").items()}
    assert reports == {
        "BranchStarted": 3,
        "BranchCompleted": 3,
        "BranchFailed": 0,
        "BranchSkipped": 0,
    }


def run_worker(worker: BranchWorker) -> threading.Thread:
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize(("before_ms", "taken"), [(0, False), (1, True)])
def test_a_task_claimed_exactly_at_expiry_is_rejected(
    harness: AdmissionHarness, before_ms: int, taken: bool
) -> None:
    harness.start_processor()
    harness.deliver(candle())
    out = harness.wait_for(lambda o: len(o.of(BranchLaunched)) == 3 and o.of(RunAdmitted))
    [run] = out.of(RunAdmitted)
    # Eligible iff now + clock_uncertainty < expires_at: the run's 250 ms allowance reaches
    # the deadline exactly at expires_at - 250 (the worker's own allowance is 0).
    at = run.expires_at_ms - run.clock_uncertainty_ms - before_ms
    handled: list[str] = []

    def handler(task: Task) -> dict[str, object]:
        handled.append(task.slot)
        return {"remaining": task.remaining(at)}

    worker = BranchWorker(
        harness.settings, handler, slots=["signal"], clock=lambda: at, name="edge"
    )
    thread = run_worker(worker)
    try:
        kinds = BranchCompleted if taken else BranchSkipped
        out = harness.wait_for(lambda o: len(o.of(kinds)) == 1)
    finally:
        worker.stop()
        thread.join(30)
    if taken:
        assert handled == ["signal"]
        assert out.of(BranchCompleted)[0].result_json == '{"remaining":1}'
    else:
        assert handled == []  # no ordinary analysis continuation
        [skipped] = out.of(BranchSkipped)
        assert (skipped.slot, skipped.reason) == ("signal", "expired_at_dequeue")


def test_a_worker_restart_keeps_the_original_deadline(harness: AdmissionHarness) -> None:
    harness.start_processor()
    harness.deliver(candle(candle_open="2026-11-30T12:01:00Z"))  # 5 s left at the clock
    out = harness.wait_for(lambda o: len(o.of(BranchLaunched)) == 3 and o.of(RunAdmitted))
    [run] = out.of(RunAdmitted)
    seen: list[Task] = []

    class Crash(BaseException):
        """Ends the worker's loop before it commits the task's offset, as a kill would."""

    def dying(task: Task) -> dict[str, object]:
        seen.append(task)
        raise Crash

    first = BranchWorker(
        harness.settings, dying, slots=["signal"], clock=harness.clock, name="first"
    )
    with pytest.raises(Crash):
        first.run()
    assert [t.expires_at_ms for t in seen] == [run.expires_at_ms]
    # A replacement worker takes the same task after the deadline: it gets no new window.
    later = run.expires_at_ms + 2_000
    second = BranchWorker(
        harness.settings, dying, slots=["signal"], clock=lambda: later, name="second"
    )
    thread = run_worker(second)
    try:
        out = harness.wait_for(lambda o: len(o.of(BranchSkipped)) == 1)
    finally:
        second.stop()
        thread.join(30)
    [skipped] = out.of(BranchSkipped)
    assert (skipped.worker, skipped.reason) == ("second", "expired_at_dequeue")
    assert len(seen) == 1  # the replacement never ran the handler
    launched = [t for t in out.of(BranchLaunched) if t.slot == "signal"]
    assert [t.expires_at_ms for t in launched] == [run.expires_at_ms]


def test_a_fresh_signal_is_proposed_approved_and_dispatched_by_the_gate(
    harness: AdmissionHarness,
) -> None:
    harness.start_processor()
    gate: Processor[object, object, object] = Processor(
        harness.settings,
        GateApp(harness.settings),  # type: ignore[arg-type]
        instance_id="g1",
        clock=harness.clock,
        batch_size=200,
    )
    gate_thread = threading.Thread(target=gate.run, daemon=True)
    gate_thread.start()
    worker = BranchWorker(harness.settings, demo_handler, clock=harness.clock, name="demo")
    thread = run_worker(worker)
    dispatched: list[ActionDispatched] = []

    def read() -> bool:
        dispatched[:] = [
            record
            for m in read_topic(harness.settings, harness.settings.topic(ACTIONS))
            if isinstance(record := decode(m.value() or b""), ActionDispatched)
        ]
        return bool(dispatched)

    try:
        # Candle 12:01 closes at 12:02:00, the harness clock: 5 s left at every step.
        harness.deliver(candle(candle_open="2026-11-30T12:01:00Z"))
        wait_until(read, timeout_s=90, interval_s=0.3)
    finally:
        worker.stop()
        thread.join(30)
        gate.stop()
        gate_thread.join(60)
    [action] = dispatched
    out = harness.outcomes()
    [run] = out.of(RunAdmitted)
    assert action.action_id == f"{run.run_id}.entry"
    assert action.expires_at_ms == run.expires_at_ms
    assert action.approvals == ("analysis",)
    assert (action.instrument, action.account, action.side) == ("BTCUSDT", "acc-1", "buy")


def test_a_crash_repeats_only_the_task_in_flight_however_slow_the_handlers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker takes a batch of tasks at once. With slow handlers it commits what it has
    handled once a turn has run :data:`TURN_BUDGET_S`, not once the whole batch is done: a
    crash repeats the task in flight, not every task of the batch before it. The handlers'
    time is a controlled clock: each takes 20 s of it."""
    harness = AdmissionHarness(partitions=1)  # every task in one partition, one batch
    try:
        harness.apply_workflow()
        harness.start_processor()
        for minute in range(4):
            harness.deliver(candle(candle_open=f"2026-11-30T11:5{minute + 6}:00Z"))
        harness.wait_for(lambda o: len(o.of(BranchLaunched)) == 12)
        spent = [0.0]
        handled: list[tuple[str, str]] = []

        class Crash(BaseException):
            """Ends the worker's loop mid-batch, as a kill would."""

        def slow(task: Task) -> dict[str, object]:
            if len(handled) == 6:
                raise Crash
            handled.append((task.run_id, task.slot))
            spent[0] += 20.0
            return {}

        first = BranchWorker(
            harness.settings, slow, deadline_slots=[], name="first", monotonic=lambda: spent[0]
        )
        with pytest.raises(Crash):
            first.run()
        assert len(handled) == 6
        assert first.alive(spent[0])  # it came round after each task, not once per batch
        again: list[tuple[str, str]] = []

        def fast(task: Task) -> dict[str, object]:
            again.append((task.run_id, task.slot))
            return {}

        second = BranchWorker(harness.settings, fast, deadline_slots=[], name="second")
        thread = run_worker(second)
        try:
            harness.wait_for(lambda o: len(o.of(BranchCompleted)) == 12)
        finally:
            second.stop()
            thread.join(30)
        assert set(again).isdisjoint(handled), f"{len(set(again) & set(handled))} repeated"
        assert len(again) == 6  # the crashed task and the five never taken
    finally:
        harness.close()


def test_a_result_kafka_cannot_carry_fails_its_branch_not_the_worker(
    harness: AdmissionHarness,
) -> None:
    """A handler's result travels as one Kafka record of JSON. A result over the record limit
    (the producer refuses it) or one that is not JSON (a ``Decimal`` price, a set) used to
    raise out of the worker's loop, so the worker died on that task, and again on every
    restart. Now each such branch is reported failed, its error saying why, and the worker
    goes on."""
    harness.start_processor()
    harness.deliver(candle())

    def handler(task: Task) -> dict[str, object]:
        if task.slot == "signal":
            return {"blob": "x" * 2_000_000}
        if task.slot == "journal":
            return {"price": Decimal("97000.5")}
        return {"slot": task.slot}

    worker = BranchWorker(harness.settings, handler, deadline_slots=[], name="odd")
    thread = run_worker(worker)
    try:
        out = harness.wait_for(
            lambda o: len(o.of(BranchFailed)) == 2 and len(o.of(BranchCompleted)) == 1
        )
        assert thread.is_alive(), "the worker died"
    finally:
        worker.stop()
        thread.join(30)
    failed = {e.slot: e for e in out.of(BranchFailed)}
    assert sorted(failed) == ["journal", "signal"]
    assert {e.worker for e in failed.values()} == {"odd"}
    assert "2,000,011 bytes" in failed["signal"].error, failed["signal"].error
    assert "not JSON" in failed["journal"].error and "Decimal" in failed["journal"].error
    assert [e.slot for e in out.of(BranchCompleted)] == ["analysis"]


SHORT_POLL_INTERVAL = {"session.timeout.ms": 6000, "max.poll.interval.ms": 6000}
"""The broker's shortest session (``group.min.session.timeout.ms``) and, as librdkafka
requires, a poll interval no shorter: a handler of 9 s outlasts it."""


def claims_by_task(harness: AdmissionHarness) -> Counter[tuple[str, str]]:
    """How many times each (run, slot) was taken: one ``ReportBranchStarted`` per handler call."""
    return Counter(
        (claim.run_id, claim.slot)
        for claim in (
            decode(m.value() or b"")
            for m in read_topic(harness.settings, harness.settings.topic(BRANCH_RESULTS))
        )
        if isinstance(claim, ReportBranchStarted)
    )


def launch_three_tasks(harness: AdmissionHarness) -> int:
    """Admit one run (3 slots) into a one-partition harness; the offset of its last task."""
    harness.apply_workflow()
    harness.start_processor()
    harness.deliver(candle())
    harness.wait_for(lambda o: len(o.of(BranchLaunched)) == 3)
    return max(m.offset() or 0 for m in read_topic(harness.settings, harness.settings.topic(TASKS)))


def wait_for_commit_past(harness: AdmissionHarness, offset: int) -> None:
    """Wait until the workers' group committed a position past ``offset`` of the (single)
    tasks partition: nothing up to it is handled again after that."""
    group = f"{harness.settings.topic_prefix}branch-workers"
    tasks = TopicPartition(harness.settings.topic(TASKS), 0)

    def committed_past() -> bool:
        consumer = Consumer(harness.settings.kafka_config(**{"group.id": group}))
        try:
            [position] = consumer.committed([tasks], 10)
            return position.offset > offset
        finally:
            consumer.close()

    wait_until(committed_past, timeout_s=60, what=f"the workers to commit past {offset}")


def test_a_handler_longer_than_the_poll_interval_keeps_the_workers_partitions() -> None:
    """``max.poll.interval.ms`` bounds the time between two polls of a consumer; past it,
    librdkafka leaves the group. A handler may take longer (a slow venue, a human approval):
    the worker keeps polling while it runs, so it keeps its partition and each task is
    handled once. The poll interval here is 6 s and the first handler takes 9 s."""
    harness = AdmissionHarness(partitions=1)
    try:
        last_task = launch_three_tasks(harness)
        calls: Counter[tuple[str, str]] = Counter()

        def slow_first(task: Task) -> dict[str, object]:
            calls[task.run_id, task.slot] += 1
            if sum(calls.values()) == 1:
                threading.Event().wait(9.0)  # the handler's own work: longer than the interval
            return {}

        worker = BranchWorker(
            harness.settings,
            slow_first,
            deadline_slots=[],
            name="patient",
            consumer_tuning=SHORT_POLL_INTERVAL,
        )
        thread = run_worker(worker)
        try:
            wait_for_commit_past(harness, last_task)
            out = harness.wait_for(lambda o: len(o.of(BranchCompleted)) == 3)
        finally:
            worker.stop()
            thread.join(30)
        assert sorted(calls.values()) == [1, 1, 1], f"handler calls per task: {dict(calls)}"
        assert sorted(claims_by_task(harness).values()) == [1, 1, 1]
        assert {e.worker for e in out.of(BranchCompleted)} == {"patient"}
    finally:
        harness.close()


def test_a_worker_joining_while_a_handler_runs_repeats_no_task() -> None:
    """While a long handler runs the worker polls, so a rebalance (a second worker joins)
    reaches it mid-task: it waits for the handler, reports it and commits what it handled
    before giving its partition up. Whichever worker gets the partition then, every task is
    handled once."""
    harness = AdmissionHarness(partitions=1)
    try:
        last_task = launch_three_tasks(harness)
        calls: Counter[tuple[str, str]] = Counter()
        first_running = threading.Event()

        def handler(task: Task) -> dict[str, object]:
            calls[task.run_id, task.slot] += 1
            if not first_running.is_set():
                first_running.set()
                threading.Event().wait(4.0)  # the second worker joins meanwhile
            return {}

        def new_worker(name: str) -> BranchWorker:
            return BranchWorker(
                harness.settings,
                handler,
                deadline_slots=[],
                name=name,
                consumer_tuning=SHORT_POLL_INTERVAL,
            )

        # A consumer joins its group when it subscribes: the second is made once the first
        # is in its handler.
        workers = [new_worker("first")]
        threads = [run_worker(workers[0])]
        try:
            assert first_running.wait(60), "the first worker took no task"
            workers.append(new_worker("joining"))
            threads.append(run_worker(workers[1]))
            wait_for_commit_past(harness, last_task)
            harness.wait_for(lambda o: len(o.of(BranchCompleted)) == 3)
        finally:
            for worker in workers:
                worker.stop()
            for thread in threads:
                thread.join(30)
        assert sorted(calls.values()) == [1, 1, 1], f"handler calls per task: {dict(calls)}"
        assert sorted(claims_by_task(harness).values()) == [1, 1, 1]
    finally:
        harness.close()


def _keeper_threads(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == f"keep-polling-{name}"]


def test_a_worker_driven_by_step_closes_its_helper_and_leaves_its_group(
    harness: AdmissionHarness,
) -> None:
    """An embedder that drives the worker with step() instead of run() releases it with
    close(): the helper thread ends and the consumer leaves its group at once, so the
    partitions go to the other workers without waiting out the session timeout."""
    harness.start_processor()
    harness.deliver(candle())
    group = f"{harness.settings.topic_prefix}branch-workers"
    with BranchWorker(harness.settings, demo_handler, deadline_slots=[], name="stepped") as w:
        handled = [0]

        def some_handled() -> bool:
            handled[0] += w.step()
            return handled[0] > 0

        wait_until(some_handled, 60)
        assert _keeper_threads("stepped"), "the helper starts with the first handler"
        assert group_members(harness, group) == 1
    assert not _keeper_threads("stepped")
    assert group_members(harness, group) == 0
    w.close()  # again: nothing left to release


def group_members(harness: AdmissionHarness, group: str) -> int:
    admin = AdminClient(harness.settings.kafka_config())
    (future,) = admin.describe_consumer_groups([group], request_timeout=10).values()
    return len(future.result().members)
