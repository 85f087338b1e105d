"""Shared builders for the ``test_gate_*`` tests (no tests in this module).

A :class:`Gate` folds commands through the gate's ``decide`` + ``evolve`` per scope key the
way the engine does (optionally round-tripping the state through its codec after every step,
as a restart from the changelog would), and records every event it produced. Time is
whatever ``now`` the test passes: there is no clock.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from typing import Any

from schemas.events import (
    ActionDispatched,
    CandidateAccepted,
    CandidateExpired,
    CandidateProposed,
    CandidateRejected,
    CandidateSuperseded,
    DispatchRequested,
    DispatchWithdrawn,
)
from streams.core.durations import parse_time
from streams.core.gate import (
    CheckTimers,
    Command,
    GateEvent,
    ProposeCandidate,
    RequestDispatch,
    ScopeState,
    WithdrawDispatch,
    decide,
    decode_state,
    encode_state,
    evolve,
)
from streams.core.gate.rules import candidate_deadline

T0 = parse_time("2026-11-30T12:00:00Z")
"""The seed article's source event: 12:00:00.000 UTC."""
SCOPE = "paper|account=acc-1|instrument=BTCUSDT|side=buy"
TERMINAL_TYPES = (CandidateSuperseded, CandidateExpired, CandidateRejected, ActionDispatched)


def run_id(n: int) -> str:
    return f"run-{n:024x}"


def proposal(
    n: int = 1,
    *,
    kind: str = "entry",
    generation: str | None = None,
    generation_kind: str = "number",
    source_time_ms: int = T0,
    window_ms: int = 5_000,
    clock_uncertainty_ms: int = 0,
    exit_window_ms: int | None = None,
    proposed_at_ms: int | None = None,
    scope_key: str = SCOPE,
    **overrides: Any,
) -> CandidateProposed:
    """Candidate ``n`` of run ``run_id(n)``; its generation defaults to ``str(n)``."""
    rid = run_id(n)
    p = CandidateProposed(
        candidate_id=f"{rid}.{kind}",
        run_id=rid,
        admission_key=f"btc-breakout/paper/tradingview/d:binance|BTCUSDT|1m|{n}|breakout-v1",
        scope_key=scope_key,
        subscription="btc-breakout",
        environment="paper",
        kind=kind,
        side="buy" if kind == "entry" else "sell",
        quantity="0.010",
        notional=None,
        limit_price="97000.5",
        max_slippage_bps="5",
        params_json='{"rule":"breakout-v1"}',
        protection_json='{"kind":"stop_loss","stop_price":"96000"}' if kind == "entry" else None,
        notification_json=None,
        reassessment_of=None,
        venue="binance",
        instrument="BTCUSDT",
        account="acc-1",
        generation=str(n) if generation is None else generation,
        generation_kind=generation_kind,
        expires_at_ms=source_time_ms + window_ms,
        source_time_ms=source_time_ms,
        validity_source_time="candle_close",
        validity_window_ms=window_ms,
        clock_uncertainty_ms=clock_uncertainty_ms,
        workflow_revision=1,
        exit_window_ms=exit_window_ms,
        enqueued_at_ms=source_time_ms + 200,
        dequeued_at_ms=source_time_ms + 400,
        proposed_at_ms=source_time_ms + 600 if proposed_at_ms is None else proposed_at_ms,
    )
    return dataclasses.replace(p, **overrides)


def request(p: CandidateProposed, requested_at_ms: int, **overrides: Any) -> DispatchRequested:
    """The dispatch request of ``p``, carrying a faithful deadline copy unless overridden."""
    r = DispatchRequested(
        candidate_id=p.candidate_id,
        run_id=p.run_id,
        admission_key=p.admission_key,
        scope_key=p.scope_key,
        kind=p.kind,
        approvals=("analysis",),
        expires_at_ms=candidate_deadline(p),
        source_time_ms=p.source_time_ms,
        validity_source_time=p.validity_source_time,
        validity_window_ms=p.validity_window_ms,
        clock_uncertainty_ms=p.clock_uncertainty_ms,
        workflow_revision=p.workflow_revision,
        requested_at_ms=requested_at_ms,
    )
    return dataclasses.replace(r, **overrides)


def command_scope(command: Command) -> str | None:
    if isinstance(command, ProposeCandidate):
        return command.proposal.scope_key
    if isinstance(command, RequestDispatch):
        return command.request.scope_key
    if isinstance(command, WithdrawDispatch):
        return command.withdrawal.scope_key
    return None


class Gate:
    """decide + evolve per scope key, like the engine; keeps every event it produced."""

    def __init__(self, *, restart_every_step: bool = False) -> None:
        self.states: dict[str, ScopeState] = {}
        self.events: list[GateEvent] = []
        self.by_scope: dict[str, list[GateEvent]] = defaultdict(list)
        self.restart_every_step = restart_every_step

    def state(self, key: str = SCOPE) -> ScopeState | None:
        return self.states.get(key)

    def handle(self, command: Command, now: int, key: str | None = None) -> list[GateEvent]:
        key = key if key is not None else command_scope(command)
        assert key is not None, "CheckTimers needs an explicit key"
        state = self.states.get(key)
        events = decide(state, command, now)
        for event in events:
            state = evolve(state, event)
        if state is not None:
            if self.restart_every_step:
                state = decode_state(encode_state(state))
            self.states[key] = state
        self.events.extend(events)
        self.by_scope[key].extend(events)
        return events

    def propose(self, p: CandidateProposed, now: int) -> list[GateEvent]:
        return self.handle(ProposeCandidate(p), now)

    def request(self, r: DispatchRequested, now: int) -> list[GateEvent]:
        return self.handle(RequestDispatch(r), now)

    def withdraw(self, w: DispatchWithdrawn, now: int) -> list[GateEvent]:
        return self.handle(WithdrawDispatch(w), now)

    def timers(self, now: int, key: str = SCOPE) -> list[GateEvent]:
        return self.handle(CheckTimers(), now, key)

    def restart(self) -> None:
        """Drop in-memory state and restore it from encoded bytes (the changelog)."""
        stored = {key: encode_state(state) for key, state in self.states.items()}
        self.states = {key: decode_state(data) for key, data in stored.items()}

    def outcomes(self) -> list[GateEvent]:
        """Every event except held requests (the ones that leave the gate)."""
        return [e for e in self.events if not isinstance(e, DispatchRequested)]


def of_type(events: list[GateEvent], kind: type | tuple[type, ...]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def names(events: list[GateEvent]) -> list[str]:
    return [type(e).__name__ for e in events]


def candidate_of(event: GateEvent) -> str:
    return event.action_id if isinstance(event, ActionDispatched) else event.candidate_id


def accepted_ids(events: list[GateEvent]) -> list[str]:
    return [e.candidate_id for e in events if isinstance(e, CandidateAccepted)]
