"""Properties of the admission aggregate under arbitrary interleavings (Hypothesis).

(a) Any shuffle of deliveries with duplicates, equivalent re-encodings, conflicting copies and
    unidentifiable copies yields one RunAdmitted per distinct admission key, one outcome per
    delivery, and slots x runs launches.
(b) Any sequence of branch reports (shuffled, duplicated, stale attempts) and timer firings
    never raises, never moves a finished slot, reports each slot outcome at most once, and
    moves the run status only along allowed transitions.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from hypothesis import event, given, settings
from hypothesis import strategies as st

from schemas.commands import (
    ReportBranchCompleted,
    ReportBranchFailed,
    ReportBranchSkipped,
    ReportBranchStarted,
)
from schemas.events import (
    BranchCompleted,
    BranchFailed,
    BranchLaunched,
    BranchSkipped,
    BranchStarted,
    DeliveryDeduplicated,
    DeliveryRejected,
    OccurrenceConflict,
    RunAdmitted,
    RunStatusChanged,
)
from streams.core.admission import (
    AdmissionEvent,
    Admit,
    CheckTimers,
    RecordBranchReport,
    WorkerReport,
)
from streams.core.durations import format_time
from streams.core.identity import content_view, identify
from streams.core.lifecycle import (
    BRANCH,
    RUN,
    BranchStatus,
    RunStatus,
    run_status_from_slots,
)
from tests.support.core import (
    MINUTE,
    SLOTS,
    T0,
    Processor,
    candle,
    delivery,
    of_type,
    workflow,
)

NOW = T0 + 10 * MINUTE
SUBSCRIPTIONS = ("btc-breakout", "eth-breakout")


@dataclass(frozen=True)
class Copy:
    subscription: str
    candle_index: int
    time_form: int  # how the candle time is written (same instant)
    price_form: int  # how the price is written (same number)
    conflicting: bool  # other immutable content under the same identity
    broken: bool  # identity cannot be derived


def open_time(index: int, form: int) -> object:
    ms = T0 + index * MINUTE
    return [format_time(ms), ms, str(ms), format_time(ms).replace("Z", "+00:00")][form]


copies = st.builds(
    Copy,
    subscription=st.sampled_from(SUBSCRIPTIONS),
    candle_index=st.integers(0, 3),
    time_form=st.integers(0, 3),
    price_form=st.integers(0, 2),
    conflicting=st.booleans(),
    broken=st.sampled_from([False, False, False, True]),
)


def payload_of(copy: Copy) -> dict[str, object]:
    price: object = ["97000.5", "97000.50", 97000.5][copy.price_form]
    payload = candle(open_time(copy.candle_index, copy.time_form), price=price)
    if copy.conflicting:
        payload["side"] = "sell"
    if copy.broken:
        del payload["venue"]
    return payload


@settings(max_examples=200, deadline=None)
@given(
    st.lists(copies, min_size=1, max_size=12).flatmap(
        # duplicate some copies verbatim, then shuffle the whole batch
        lambda base: st.permutations(base + base[: len(base) // 2])
    )
)
def test_one_run_per_key_and_one_outcome_per_delivery(batch: list[Copy]) -> None:
    proc = Processor(restart_every_step=True)
    first_content: dict[str, str] = {}
    expected_outcome: dict[str, type] = {}
    for i, copy in enumerate(batch):
        wf = workflow(subscription=copy.subscription)
        payload = payload_of(copy)
        d = delivery(wf, payload, f"d-{i}", NOW + i)
        if copy.broken:
            expected_outcome[d.delivery_id] = DeliveryRejected
        else:
            digest = identify(wf, payload).content_digest
            if d.admission_key not in first_content:
                first_content[d.admission_key] = digest
                expected_outcome[d.delivery_id] = RunAdmitted
            elif first_content[d.admission_key] == digest:
                expected_outcome[d.delivery_id] = DeliveryDeduplicated
            else:
                expected_outcome[d.delivery_id] = OccurrenceConflict
        proc.handle(Admit(d, wf), NOW + i)
        if i % 5 == 4:  # timers interleave with deliveries in a real processor
            proc.timers(NOW + i)

    outcomes: Counter[str] = Counter()
    kinds: dict[str, type] = {}
    for produced in proc.events:
        if isinstance(
            produced, RunAdmitted | DeliveryDeduplicated | OccurrenceConflict | DeliveryRejected
        ):
            outcomes[produced.delivery_id] += 1
            kinds[produced.delivery_id] = type(produced)
    assert set(outcomes) == {f"d-{i}" for i in range(len(batch))}
    assert set(outcomes.values()) == {1}
    assert kinds == expected_outcome
    event(f"runs: {len(first_content)}; conflicts: {len(of_type(proc.events, OccurrenceConflict))}")

    admitted = of_type(proc.events, RunAdmitted)
    assert len(admitted) == len(first_content)
    assert {e.admission_key for e in admitted} == set(first_content)
    assert len(of_type(proc.events, BranchLaunched)) == len(admitted) * len(SLOTS)
    # Every duplicate is answered with its key's one run.
    run_of_key = {e.admission_key: e.run_id for e in admitted}
    for answered in of_type(proc.events, DeliveryDeduplicated) + of_type(
        proc.events, OccurrenceConflict
    ):
        assert answered.run_id == run_of_key[answered.admission_key]


def test_equivalent_copies_share_content() -> None:
    # Guards the generator above: the time and price forms really are equivalent.
    wf = workflow()
    views = {
        content_view(wf, payload_of(Copy("btc-breakout", 1, t, p, False, False))).digest
        for t in range(4)
        for p in range(3)
    }
    assert len(views) == 1


REPORT_KINDS = (BranchStarted, BranchCompleted, BranchFailed, BranchSkipped)

reports = st.tuples(
    st.just("report"),
    st.sampled_from(REPORT_KINDS),
    st.sampled_from((*SLOTS, *SLOTS, "ghost")),
    st.sampled_from((1, 1, 1, 2, 3, 0, 4)),  # mostly real attempts, some never launched
    st.sampled_from((True, True, True, False)),  # right run id, or an unknown one
)
timers = st.tuples(st.just("timers"), st.integers(0, 45_000))
operations = st.one_of(reports, reports, reports, timers)


def make_report(
    kind: type, run_id: str, key: str, slot: str, *, attempt: int, at: int
) -> WorkerReport:
    if kind is BranchStarted:
        return ReportBranchStarted(run_id, key, slot, attempt, "w", at)
    if kind is BranchCompleted:
        return ReportBranchCompleted(run_id, key, slot, attempt, "w", "{}", at)
    if kind is BranchFailed:
        return ReportBranchFailed(run_id, key, slot, attempt, "w", "err", at)
    return ReportBranchSkipped(run_id, key, slot, attempt, "w", "skip", at)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(operations, min_size=3, max_size=30).flatmap(
        lambda ops: st.permutations(ops + ops[: len(ops) // 2])
    )
)
def test_branch_reports_never_break_the_lifecycle(ops: list[tuple[object, ...]]) -> None:
    proc = Processor()
    wf = workflow()
    d = delivery(wf, candle(), "d-0", NOW)
    key = d.admission_key
    [admitted, *_] = proc.handle(Admit(d, wf), NOW)
    assert isinstance(admitted, RunAdmitted)
    run_id = admitted.run_id

    now = NOW
    finished: dict[str, BranchStatus] = {}
    statuses = [RunStatus.PENDING]
    for op in ops:
        if op[0] == "timers":
            now += int(op[1])  # type: ignore[call-overload]
            events: list[AdmissionEvent] = proc.handle(CheckTimers(), now, key=key)
        else:
            _, kind, slot, attempt, right_run = op
            report = make_report(
                kind,  # type: ignore[arg-type]
                run_id if right_run else "run-unknown",
                key,
                str(slot),
                attempt=int(attempt),  # type: ignore[call-overload]
                at=now,
            )
            events = proc.handle(RecordBranchReport(report), now)

        state = proc.state(key)
        assert state is not None
        run = state.original
        for slot_state in run.slots:
            if slot_state.slot in finished:  # a finished slot never moves again
                assert slot_state.status is finished[slot_state.slot]
            elif BRANCH.is_terminal(slot_state.status):
                finished[slot_state.slot] = slot_state.status
        for change in of_type(events, RunStatusChanged):
            assert change.previous_status == statuses[-1].value
            statuses.append(RUN.transition(statuses[-1], RunStatus(change.status)))
        assert run.status is statuses[-1]
        assert run.status is run_status_from_slots(run.slot_statuses(), run.status)

    outcomes = Counter(
        e.slot for e in proc.events if isinstance(e, BranchCompleted | BranchFailed | BranchSkipped)
    )
    assert all(count == 1 for count in outcomes.values())
    assert set(outcomes) == set(finished)
    event(f"finished slots: {len(finished)}; final status: {statuses[-1].value}")
    if len(finished) == len(SLOTS):
        assert statuses[-1] in (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.SKIPPED)
