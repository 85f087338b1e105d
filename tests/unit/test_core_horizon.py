"""The redelivery horizon under changing retention (streams.core.admission + workflow).

A record is evicted under the retention of the revision that admitted it. Whatever happens to
``retention`` afterwards, a late copy of that occurrence must never be admitted again: a
delivery with no admission record is judged against the smallest retention in effect at any
time between its source time and now (the revision's retention history).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from schemas.commands import ReportBranchCompleted
from schemas.events import (
    AdmissionRecordEvicted,
    BranchLaunched,
    DeliveryRejected,
    RunAdmitted,
    WorkflowRevised,
)
from streams.core.admission import Admit, RecordBranchReport
from streams.core.retention import periods
from streams.core.workflow import parse_workflow_file, revise
from tests.support.core import MINUTE, T0, Processor, candle, contract_document, delivery

HOUR = 60 * MINUTE
DAY = 24 * HOUR
CLOSE_A = T0 + MINUTE  # candle A closes at 12:01


def revised(
    current: WorkflowRevised | None, retention: str, now: int, window: str = "5s"
) -> WorkflowRevised | None:
    """The contract workflow with ``retention``, revised from ``current`` at ``now``."""
    document = contract_document()
    document["workflow"][0]["retention"] = retention
    document["workflow"][0]["validity"]["window"] = window
    [definition] = parse_workflow_file(document)
    return revise(current, definition, now)


def revision(
    current: WorkflowRevised | None, retention: str, now: int, window: str = "5s"
) -> WorkflowRevised:
    changed = revised(current, retention, now, window)
    assert changed is not None
    return changed


def complete_all(proc: Processor, events: list[Any], now: int) -> None:
    for launched in events:
        if isinstance(launched, BranchLaunched):
            done = ReportBranchCompleted(
                launched.run_id, launched.admission_key, launched.slot, 1, "w", "{}", now
            )
            proc.handle(RecordBranchReport(done), now)


def deliver(
    proc: Processor, wf: WorkflowRevised, payload: dict[str, object], did: str, now: int
) -> list[Any]:
    return list(proc.handle(Admit(delivery(wf, payload, did, now), wf), now))


def test_raising_retention_does_not_readmit_an_evicted_occurrence() -> None:
    proc = Processor()
    wf1 = revision(None, "1h", T0 - DAY)
    admitted = deliver(proc, wf1, candle(), "a-1", CLOSE_A)
    assert isinstance(admitted[0], RunAdmitted)
    complete_all(proc, admitted, CLOSE_A)
    evicted_at = CLOSE_A + 2 * HOUR  # source time + 1 h retention + 1 h margin
    assert isinstance(proc.timers(evicted_at)[0], AdmissionRecordEvicted)

    wf2 = revision(wf1, "30d", evicted_at + MINUTE)  # retention raised after the eviction
    [late] = deliver(proc, wf2, candle(), "a-late", evicted_at + 2 * MINUTE)
    assert isinstance(late, DeliveryRejected), late
    assert late.reason == "beyond_horizon"
    assert "1h" in late.detail
    assert len([e for e in proc.events if isinstance(e, RunAdmitted)]) == 1


def test_lowering_retention_narrows_the_horizon_at_once() -> None:
    wf1 = revision(None, "7d", T0 - DAY)
    wf2 = revision(wf1, "1h", CLOSE_A + HOUR)
    [late] = deliver(Processor(), wf2, candle(), "a-1", CLOSE_A + 2 * HOUR)
    assert isinstance(late, DeliveryRejected)
    assert late.reason == "beyond_horizon"


def test_a_raise_widens_the_horizon_only_for_occurrences_after_it() -> None:
    wf1 = revision(None, "1h", T0 - DAY)
    raised_at = T0 - HOUR
    wf2 = revision(wf1, "30d", raised_at)
    # Candle A closed an hour after the raise: its horizon is 30 days.
    [admitted, *_] = deliver(Processor(), wf2, candle(), "a-1", CLOSE_A + 3 * DAY)
    assert isinstance(admitted, RunAdmitted)
    # A candle that closed before the raise keeps the 1 h horizon it had.
    before = candle("2026-11-30T10:00:00Z")
    [late] = deliver(Processor(), wf2, before, "b-1", CLOSE_A + 2 * HOUR)
    assert isinstance(late, DeliveryRejected)
    assert late.reason == "beyond_horizon"


def test_retention_history_is_carried_pruned_and_bounded() -> None:
    wf = revision(None, "1d", T0 - 400 * DAY)
    # Flapping retention for a long time never makes the history grow without bound.
    for i in range(1, 500):
        wf = revision(wf, ["1h", "2h", "7d"][i % 3], T0 - 400 * DAY + i * HOUR)
    assert len(wf.retention_history) <= 64
    # Long after, only what can still matter is kept.
    wf = revision(wf, "1h", T0)
    wf = revision(wf, "2h", T0 + 1)
    assert len(wf.retention_history) <= 3
    # A change of something else keeps the history as it is.
    unrelated = revision(wf, "2h", T0 + 2, window="9s")
    assert unrelated.retention_history == wf.retention_history


def test_history_entries_not_written_by_a_revision_are_skipped_never_raised_on() -> None:
    wf = revision(None, "1d", T0)
    odd = ("\u00b2:5", "1:\u00b2", "\uff11:2", "5", "x:y", " 1:2", "1:2\n", "1" * 5000 + ":2")
    assert periods(replace(wf, retention_history=(*odd, f"{T0}:{DAY}"))) == ((T0, DAY),)


@given(st.lists(st.text(max_size=30), max_size=8))
def test_any_retention_history_reads_as_periods_ending_with_the_retention(
    entries: list[str],
) -> None:
    wf = revision(None, "1d", T0)
    read = periods(replace(wf, retention_history=tuple(entries)))
    assert read and read[-1][1] == wf.retention_ms


# ------------------------------------------------------------------------ the property

RETENTIONS = ("1h", "2h", "6h", "1d", "3d", "7d", "30d")
RETENTION_MS = {"1h": HOUR, "2h": 2 * HOUR, "6h": 6 * HOUR, "1d": DAY, "3d": 3 * DAY}
RETENTION_MS.update({"7d": 7 * DAY, "30d": 30 * DAY})


@dataclass(frozen=True)
class Copy:
    candle: int  # which hourly candle
    after_close_ms: int  # when the copy arrives, from the candle's close (may be a bit early)


@dataclass(frozen=True)
class Revision:
    at_ms: int  # processor time the revision becomes visible to the processor
    retention: str
    skew_ms: int  # applying machine's clock minus the processor's, less the time to see it


# Times on an hourly grid (so that evictions, raises and late copies interleave often),
# each with a small offset: a copy may come a little before the candle closes (clock
# uncertainty), a revision may be stamped by a clock that is a little off.
hours = st.one_of(st.integers(0, 3), st.integers(0, 72), st.integers(0, 40 * 24)).map(
    lambda h: h * HOUR
)
copies = st.builds(
    Copy,
    candle=st.integers(0, 5),
    after_close_ms=st.tuples(hours, st.sampled_from((-200, 0, 1, 59 * MINUTE))).map(sum),
)
revisions = st.builds(
    Revision,
    at_ms=st.tuples(hours, st.sampled_from((0, MINUTE, -MINUTE))).map(sum),
    retention=st.sampled_from(RETENTIONS),
    skew_ms=st.integers(-2 * MINUTE, MINUTE),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(copies, min_size=1, max_size=25),
    st.lists(revisions, max_size=12),
    st.sampled_from(RETENTIONS),
)
def test_no_retention_history_readmits_an_evicted_occurrence(
    deliveries: list[Copy], changes: list[Revision], first: str
) -> None:
    proc = Processor(restart_every_step=True)
    current = revision(None, first, T0 - 3 * DAY)
    timeline: list[tuple[int, int, object]] = [
        (CLOSE_A + c.candle * HOUR + c.after_close_ms, 1, c) for c in deliveries
    ]
    timeline += [(T0 + r.at_ms, 0, r) for r in changes]
    timeline.sort(key=lambda item: (item[0], item[1]))
    now = T0 - 3 * DAY
    late_copies = 0
    for i, (at, _, item) in enumerate(timeline):
        now = max(now, at)
        proc.timers(now)  # evictions that are due happen before the next record
        if isinstance(item, Revision):
            # A revision applied by a machine whose clock is a little off, seen a little late.
            changed = revised(current, item.retention, now + item.skew_ms)
            current = changed if changed is not None else current
            continue
        assert isinstance(item, Copy)
        payload = candle(T0 + item.candle * HOUR)
        events = deliver(proc, current, payload, f"d-{i}", now)
        evicted = {e.admission_key for e in proc.events if isinstance(e, AdmissionRecordEvicted)}
        late_copies += any(e.admission_key in evicted for e in events)
        complete_all(proc, events, now)

    admitted = Counter(e.admission_key for e in proc.events if isinstance(e, RunAdmitted))
    assert all(count == 1 for count in admitted.values()), admitted
    event(f"copies of an evicted occurrence: {min(late_copies, 3)}+")
    outcomes = Counter(type(e).__name__ for e in proc.events)
    event(f"admitted {outcomes['RunAdmitted']}, evicted {outcomes['AdmissionRecordEvicted']}")
    event(f"rejected {outcomes['DeliveryRejected']}, copies {outcomes['DeliveryDeduplicated']}")
