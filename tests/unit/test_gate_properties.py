"""Properties of the gate over any arrival order (hypothesis).

One scope; up to six candidates of two kinds with few distinct generations (so ties are
common); their proposals, dispatch requests (with faithful, shorter and longer deadline
copies), copies of both, and timer ticks arrive in any order, with time moving forward. The
same history is folded twice, once restoring the state from its codec after every step, and
must give the same events.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.events import (
    ActionDispatched,
    CandidateAccepted,
    CandidateProposed,
    DispatchRequested,
)
from streams.core.gate import GateEvent
from streams.core.gate.rules import candidate_deadline
from tests.support.gate import (
    SCOPE,
    T0,
    TERMINAL_TYPES,
    Gate,
    candidate_of,
    proposal,
    request,
)

FAR_FUTURE = T0 + 10**9


@dataclass(frozen=True)
class Op:
    what: str  # "propose" | "request" | "timer"
    index: int = 0
    copy_delta: int | None = 0  # request: copy = authoritative + delta; None: no copy


@st.composite
def candidates(draw: st.DrawFn) -> list[CandidateProposed]:
    count = draw(st.integers(min_value=1, max_value=6))
    out = []
    for n in range(1, count + 1):
        kind = draw(st.sampled_from(["entry", "entry", "exit"]))
        out.append(
            proposal(
                n,
                kind=kind,
                generation=str(draw(st.integers(min_value=0, max_value=3))),
                source_time_ms=T0 + draw(st.integers(min_value=0, max_value=2_000)),
                clock_uncertainty_ms=draw(st.sampled_from([0, 100])),
                exit_window_ms=draw(st.sampled_from([None, 2_000])) if kind == "exit" else None,
            )
        )
    return out


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[CandidateProposed], list[tuple[int, Op]]]:
    cands = draw(candidates())
    index = st.integers(min_value=0, max_value=len(cands) - 1)
    delta = st.sampled_from([0, 0, -1_000, 7_000, None])
    base = [Op("propose", i) for i in range(len(cands))]
    base += [Op("request", i, draw(delta)) for i in range(len(cands)) if draw(st.booleans())]
    extra = draw(
        st.lists(
            st.one_of(
                st.builds(Op, st.just("propose"), index),
                st.builds(Op, st.just("request"), index, delta),
                st.just(Op("timer")),
            ),
            max_size=8,
        )
    )
    ops = draw(st.permutations(base + extra))
    steps = draw(st.lists(st.integers(min_value=0, max_value=900), min_size=len(ops)))
    now, timed = T0, []
    for op, step in zip(ops, steps, strict=False):
        now += step
        timed.append((now, op))
    return cands, timed


def fold(
    cands: list[CandidateProposed], timed: list[tuple[int, Op]], *, restart: bool
) -> tuple[Gate, list[int]]:
    gate = Gate(restart_every_step=restart)
    arrival: list[int] = []
    for now, op in timed:
        p = cands[op.index]
        if op.what == "propose":
            if op.index not in arrival:
                arrival.append(op.index)
            gate.propose(p, now)
        elif op.what == "request":
            authority = candidate_deadline(p)
            copy = None if op.copy_delta is None or authority is None else authority + op.copy_delta
            gate.request(request(p, now, expires_at_ms=copy), now)
        else:
            gate.timers(now)
    gate.timers(FAR_FUTURE)
    return gate, arrival


def gen(value: str) -> Decimal:
    return Decimal(value)


def _outcomes(events: list[GateEvent]) -> list[GateEvent]:
    return [e for e in events if not isinstance(e, DispatchRequested)]


@settings(max_examples=400, deadline=None)
@given(histories())
def test_any_arrival_order_keeps_every_invariant(
    history: tuple[list[CandidateProposed], list[tuple[int, Op]]],
) -> None:
    cands, timed = history
    gate, arrival = fold(cands, timed, restart=False)
    restored, _ = fold(cands, timed, restart=True)
    assert restored.events == gate.events  # the codec loses nothing a decision depends on
    events = gate.outcomes()
    by_id = {p.candidate_id: p for p in cands}
    proposed = [cands[i] for i in arrival]

    # Each candidate gets at most one terminal outcome, whatever was repeated.
    terminal = Counter(candidate_of(e) for e in events if isinstance(e, TERMINAL_TYPES))
    assert all(count == 1 for count in terminal.values()), terminal

    # The highest generation of each kind ends current: the first of them to arrive.
    state = gate.state(SCOPE)
    assert state is not None
    for kind in {p.kind for p in proposed}:
        of_kind = [p for p in proposed if p.kind == kind]
        top = max(gen(p.generation) for p in of_kind)
        first_top = next(p for p in of_kind if gen(p.generation) == top)
        track = state.track(kind)
        assert track is not None
        assert (gen(track.generation), track.candidate_id) == (top, first_top.candidate_id)

    # Never a dispatch of a lower generation once a higher one was accepted.
    highest: dict[str, Decimal] = {}
    for e in events:
        if isinstance(e, CandidateAccepted):
            assert e.kind not in highest or gen(e.generation) > highest[e.kind]
            highest[e.kind] = gen(e.generation)
        elif isinstance(e, ActionDispatched):
            assert gen(e.generation) == highest[e.kind]

    # A deadline copy never grows, and a dispatch was eligible at the now it recorded.
    for e in events:
        authority = candidate_deadline(by_id[candidate_of(e)])
        if authority is not None:
            assert e.expires_at_ms is not None and e.expires_at_ms <= authority
        if isinstance(e, ActionDispatched) and e.expires_at_ms is not None:
            assert e.dispatched_at_ms + e.clock_uncertainty_ms < e.expires_at_ms

    # Ties: of equal generations of one kind, only the first to arrive can be accepted.
    accepted = {e.candidate_id for e in events if isinstance(e, CandidateAccepted)}
    groups: dict[tuple[str, Decimal], list[CandidateProposed]] = {}
    for p in proposed:
        groups.setdefault((p.kind, gen(p.generation)), []).append(p)
    for group in groups.values():
        winners = [p for p in group if p.candidate_id in accepted]
        assert len(winners) <= 1
        assert not winners or winners[0] is group[0]

    # Everything proposed ends, except a current exit without a deadline still waiting.
    waiting = {c.candidate_id for c in state.pending()}
    assert all(by_id[w].kind != "entry" and by_id[w].exit_window_ms is None for w in waiting)
    for p in proposed:
        assert terminal[p.candidate_id] == (0 if p.candidate_id in waiting else 1)
    assert state.held == () or all(h.candidate_id not in terminal for h in state.held)
