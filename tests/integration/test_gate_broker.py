"""The supersession gate on the real broker (streams.apps.gate on the exactly-once engine).

Admission's hand-offs are written to ``candidates`` keyed by scope key, as the admission app
writes them; the gate's committed decisions are read back with read_committed consumers. The
gate's clock is controlled (fixed unless a test moves it): nothing here depends on speed.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator

import pytest

from schemas.events import (
    CandidateAccepted,
    CandidateExpired,
    CandidateProposed,
    CandidateRejected,
    CandidateSuperseded,
    DispatchRequested,
)
from tests.support.gate import SCOPE, T0, proposal, request
from tests.support.gate_broker import Decisions, GateHarness

pytestmark = pytest.mark.integration

NOW = T0 + 1_000
TERMINAL = (CandidateSuperseded, CandidateExpired, CandidateRejected)


@pytest.fixture()
def gate() -> Iterator[GateHarness]:
    h = GateHarness(partitions=3)
    h.start()
    yield h
    h.close()


def outcome_count(d: Decisions) -> int:
    return sum(isinstance(e, TERMINAL) for e in d.decisions) + len(d.dispatched)


def test_a_newer_generation_arriving_first_supersedes_the_older(gate: GateHarness) -> None:
    older, newer = proposal(81), proposal(82)
    gate.send(newer, older, request(older, NOW), request(newer, NOW))
    out = gate.wait_for(lambda d: outcome_count(d) >= 2)
    [superseded] = out.of(CandidateSuperseded)
    assert (superseded.candidate_id, superseded.reason) == (
        older.candidate_id,
        "older_than_current",
    )
    assert superseded.current_generation == "82"
    assert [d.action_id for d in out.dispatched] == [newer.candidate_id]
    assert out.dispatched[0].generation == "82"


def test_an_older_event_arriving_last_cannot_win(gate: GateHarness) -> None:
    older, newer = proposal(81), proposal(82)
    gate.send(older)  # accepted: pending, current
    gate.wait_for(lambda d: len(d.of(CandidateAccepted)) == 1)
    gate.send(newer)  # supersedes the pending older candidate
    # The older one's request and a copy of its proposal arrive last.
    gate.send(request(older, NOW), older, request(newer, NOW))
    out = gate.wait_for(lambda d: len(d.dispatched) == 1)
    [superseded] = out.for_candidate(older.candidate_id)[1:]
    assert isinstance(superseded, CandidateSuperseded) and superseded.reason == "newer_generation"
    assert [d.action_id for d in out.dispatched] == [newer.candidate_id]
    assert len(out.for_candidate(older.candidate_id)) == 2  # accepted, superseded: nothing more


def test_an_exit_is_dispatched_although_a_newer_entry_exists_in_its_scope(
    gate: GateHarness,
) -> None:
    exit_ = proposal(81, kind="exit", exit_window_ms=60_000)
    entry = proposal(82)
    gate.send(exit_, entry, request(exit_, NOW))
    out = gate.wait_for(lambda d: len(d.dispatched) == 1)
    [dispatched] = out.dispatched
    assert dispatched.action_id == exit_.candidate_id and dispatched.kind == "exit"
    assert dispatched.expires_at_ms == T0 + 60_000  # its own window from its source time
    assert not out.of(CandidateSuperseded)


def test_a_request_at_or_after_the_deadline_dispatches_nothing(gate: GateHarness) -> None:
    # The deadline is NOW exactly: equality fails.
    p = proposal(1, window_ms=NOW - T0 + 1)
    late = proposal(2, scope_key=SCOPE + "|x", window_ms=NOW - T0)
    gate.send(p, request(p, NOW, expires_at_ms=NOW), late, request(late, NOW))
    out = gate.wait_for(lambda d: outcome_count(d) >= 2)
    assert out.dispatched == []
    reasons = sorted((e.candidate_id, e.reason) for e in out.of(CandidateExpired))
    assert reasons == sorted(
        [(p.candidate_id, "expired_before_send"), (late.candidate_id, "deadline_passed")]
    )


def oracle(inputs: list[CandidateProposed | DispatchRequested]) -> set[str]:
    """The candidates that may be dispatched, judged from the input order alone.

    A request dispatches its candidate only if that candidate was the first to reach the
    highest generation seen so far, nothing newer arrived before the request, and the
    deadline (the earlier copy, the larger allowance) passes at the gate's fixed ``NOW``.
    """
    best: int | None = None
    holder: str | None = None
    proposals: dict[str, CandidateProposed] = {}
    allowed: set[str] = set()
    for record in inputs:
        if isinstance(record, CandidateProposed):
            proposals[record.candidate_id] = record
            generation = int(record.generation)
            if best is None or generation > best:
                best, holder = generation, record.candidate_id
            continue
        p = proposals[record.candidate_id]
        if holder != record.candidate_id or p.expires_at_ms is None:
            continue
        expires = min(p.expires_at_ms, record.expires_at_ms or p.expires_at_ms)
        uncertainty = max(p.clock_uncertainty_ms, record.clock_uncertainty_ms)
        if NOW + uncertainty < expires and NOW + p.clock_uncertainty_ms < p.expires_at_ms:
            allowed.add(record.candidate_id)
    return allowed


def test_1000_racing_replacements_and_requests_never_dispatch_a_superseded_or_expired_one(
    gate: GateHarness,
) -> None:
    rng = random.Random(20261201)
    n = 1_000
    proposals = []
    for i in range(1, n + 1):
        fresh = rng.random() < 0.85
        proposals.append(
            proposal(
                i,
                # Mostly rising, with ties and late older generations mixed in.
                generation=str(i + rng.randint(-15, 15)),
                window_ms=60_000 if fresh else 900,  # 900: already past at NOW
                clock_uncertainty_ms=rng.choice([0, 0, 250]),
            )
        )
    # Each request follows its proposal (admission writes them in that order) at a random
    # distance, so replacements and dispatch requests interleave on the one partition.
    inputs: list[CandidateProposed | DispatchRequested] = []
    waiting: list[DispatchRequested] = []
    for p in proposals:
        inputs.append(p)
        copy_expires = p.expires_at_ms if rng.random() < 0.9 else NOW  # a shortened copy
        waiting.append(request(p, NOW, expires_at_ms=copy_expires))
        rng.shuffle(waiting)
        while waiting and rng.random() < 0.5:
            inputs.append(waiting.pop())
    inputs.extend(waiting)
    gate.send(*inputs)

    out = gate.wait_for(lambda d: outcome_count(d) >= n, timeout_s=180)

    # Every candidate ended exactly once.
    ends = Counter(
        [e.candidate_id for e in out.decisions if isinstance(e, TERMINAL)]
        + [d.action_id for d in out.dispatched]
    )
    assert len(ends) == n and set(ends.values()) == {1}
    dispatched_ids = {d.action_id for d in out.dispatched}
    superseded_ids = {e.candidate_id for e in out.of(CandidateSuperseded)}
    expired_ids = {e.candidate_id for e in out.of(CandidateExpired)}
    assert not dispatched_ids & (superseded_ids | expired_ids)
    # Every dispatch was current and in time when it was committed, and exactly the ones the
    # input order allows were dispatched.
    for d in out.dispatched:
        assert d.expires_at_ms is not None
        assert d.dispatched_at_ms + d.clock_uncertainty_ms < d.expires_at_ms
    assert dispatched_ids == oracle(inputs)
    # A dispatched generation is never lower than one accepted before it on the partition.
    accepted_before: list[int] = []
    by_id = {p.candidate_id: p for p in proposals}
    order = [e for e in out.decisions if isinstance(e, CandidateAccepted)]
    for e in order:
        accepted_before.append(int(e.generation))
    assert accepted_before == sorted(accepted_before)  # accepted generations only rise
    for d in out.dispatched:
        assert int(by_id[d.action_id].generation) <= max(accepted_before)

    counts = {
        "proposals": n,
        "requests": n,
        "accepted": len(out.of(CandidateAccepted)),
        "dispatched": len(out.dispatched),
        **{
            f"superseded_{reason}": count
            for reason, count in Counter(e.reason for e in out.of(CandidateSuperseded)).items()
        },
        **{
            f"expired_{reason}": count
            for reason, count in Counter(e.reason for e in out.of(CandidateExpired)).items()
        },
        "rejected": len(out.of(CandidateRejected)),
    }
    print("racing counts:", dict(sorted(counts.items())))
    assert counts["dispatched"] >= 1
