"""The supersession gate as a :class:`StreamApp`: the core in ``streams.core.gate`` on the engine.

Input: ``candidates`` (keyed by scope key: admission's ``CandidateProposed``,
``DispatchRequested`` and ``DispatchWithdrawn``), so every candidate and dispatch request of
one decision scope is decided on one partition, in order, by one instance. State: one
:class:`~streams.core.gate.ScopeState` per scope key in ``gate-changelog``. Outputs:
``ActionDispatched`` to ``actions`` keyed by run id (the gateway's input);
``CandidateAccepted`` / ``CandidateSuperseded`` / ``CandidateExpired`` /
``CandidateRejected`` to ``gate-decisions`` keyed by scope key. A ``DispatchRequested`` the
core returns is a request held until its proposal arrives: state only, routed nowhere.

The engine commits the decisions, the state and the input offsets in one transaction, so the
commit of ``ActionDispatched`` is the final supersession cutoff: a candidate accepted after
it cannot recall the dispatch, and a read_committed reader never sees a dispatch the gate
could still undo. The gate runs as its own component (``sluicegate gate``), with its own
consumer group and transactional ids, beside the admission processor.
"""

from __future__ import annotations

from collections.abc import Sequence

from schemas.codec import decode, encode
from schemas.errors import SchemaError
from schemas.events import (
    ActionDispatched,
    CandidateProposed,
    DispatchRequested,
    DispatchWithdrawn,
)
from schemas.topics import ACTIONS, CANDIDATES, GATE_CHANGELOG, GATE_DECISIONS
from streams.core import gate
from streams.core.gate import (
    CheckTimers,
    ProposeCandidate,
    RequestDispatch,
    ScopeState,
    WithdrawDispatch,
)
from streams.core.gate.outcomes import rejected
from streams.core.reasons import CANNOT_BE_RECORDED
from streams.engine.app import InputError, Route, evolve_each
from streams.settings import Settings

_DETAIL_CHARS = 500


class GateApp:
    """Adapter from Kafka records to gate commands."""

    name = "gate"

    def __init__(self, settings: Settings) -> None:
        self.input_topics: Sequence[str] = (settings.topic(CANDIDATES),)
        self.changelog_topic = settings.topic(GATE_CHANGELOG)
        self._actions = settings.topic(ACTIONS)
        self._decisions = settings.topic(GATE_DECISIONS)

    def decode_input(self, data: bytes) -> object:
        try:
            return decode(data)
        except SchemaError as e:
            raise InputError(str(e)) from e

    def encode_event(self, event: gate.GateEvent) -> bytes:
        return encode(event)

    def prepare(self, records: Sequence[object], now_ms: int) -> None:
        """Nothing to look up: everything the gate decides on travels with the record."""

    def to_command(self, record: object) -> gate.Command | None:
        if isinstance(record, CandidateProposed):
            return ProposeCandidate(record)
        if isinstance(record, DispatchRequested):
            return RequestDispatch(record)
        if isinstance(record, DispatchWithdrawn):
            return WithdrawDispatch(record)
        return None

    def key_of(self, record: object) -> str | None:
        # Proposals, requests and withdrawals are keyed by the decision scope they name.
        key = getattr(record, "scope_key", None)
        return key if isinstance(key, str) else None

    def timer_command(self) -> gate.Command:
        return CheckTimers()

    def decide(
        self, state: ScopeState | None, command: gate.Command, now_ms: int
    ) -> Sequence[gate.GateEvent]:
        return gate.decide(state, command, now_ms)

    def evolve(self, state: ScopeState | None, event: gate.GateEvent) -> ScopeState | None:
        return gate.evolve(state, event)

    def evolve_all(
        self, state: ScopeState | None, events: Sequence[gate.GateEvent]
    ) -> ScopeState | None:
        return evolve_each(gate.evolve, state, events)

    def next_due_ms(self, state: ScopeState) -> int | None:
        return gate.next_due_ms(state)

    def route(self, event: gate.GateEvent) -> Route | None:
        if isinstance(event, DispatchRequested):
            return None  # held in the state until its proposal arrives
        if isinstance(event, ActionDispatched):
            return Route(self._actions, event.run_id)
        return Route(self._decisions, event.scope_key)

    def encode_state(self, state: ScopeState) -> bytes:
        return gate.encode_state(state)

    def decode_state(self, data: bytes) -> ScopeState:
        return gate.decode_state(data)

    def undecidable(self, record: object, reason: str, now_ms: int) -> Sequence[gate.GateEvent]:
        # A proposal whose decision can never be recorded gets its terminal answer; nothing
        # is dispatched for it (the engine dead-letters the record with its bytes).
        if isinstance(record, CandidateProposed):
            detail = f"the decision could not be recorded: {reason}"[:_DETAIL_CHARS]
            return [rejected(record, CANNOT_BE_RECORDED, detail, None, now_ms)]
        return []
