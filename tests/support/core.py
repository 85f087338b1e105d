"""Shared builders for the ``test_core_*`` tests (no tests in this module).

The workflow is the README's example; payloads are candle triggers like its delivery
example. A :class:`Processor` folds commands through ``decide`` + ``evolve`` per admission key
the way the engine does, optionally round-tripping state through the codec after every step
(as the changelog would), and records every event it produced.
"""

from __future__ import annotations

import dataclasses
import tomllib
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from schemas.commands import AdmitDelivery, AuthorizeRerun
from schemas.events import WorkflowRevised
from streams.core.admission import (
    AdmissionEvent,
    Admit,
    CheckTimers,
    Command,
    OccurrenceState,
    RecordBranchReport,
    Rerun,
    decide,
    evolve,
    evolve_all,
)
from streams.core.canonical import canonical_json
from streams.core.durations import parse_time
from streams.core.errors import IdentityError
from streams.core.identity import identify, rejection_key
from streams.core.state_codec import decode_state, encode_state
from streams.core.workflow import parse_workflow_file, revise

CONTRACT_TOML = """
[[workflow]]
subscription = "btc-breakout"
environment  = "paper"
slots        = ["analysis", "signal", "journal"]
branch_timeout = "30s"
retention    = "7d"

[workflow.identity]
event_id = "event_id"
derived  = ["venue", "instrument", "interval", "candle_open", "rule"]

[workflow.content]
immutable = ["side", "rule", "price"]

[workflow.validity]
source_time = "candle_close"
window = "5s"
clock_uncertainty = "250ms"

[workflow.actions]
propose = "signal"
approve = ["analysis"]

[workflow.scope]
fields = ["account", "instrument", "side"]
sequence = "candle_open"

[workflow.auth]
token_env = "BTC_BREAKOUT_TOKEN"
"""

T0 = parse_time("2026-11-30T12:00:00Z")
"""Candle A's open time; B opens one minute later."""
MINUTE = 60_000
SLOTS = ("analysis", "signal", "journal")


def contract_document() -> dict[str, Any]:
    return tomllib.loads(CONTRACT_TOML)


def workflow(revision: int = 1, **overrides: Any) -> WorkflowRevised:
    """The README's example workflow as a WorkflowRevised, with field overrides."""
    [definition] = parse_workflow_file(contract_document())
    revised = revise(None, definition, now=T0 - 86_400_000)
    assert revised is not None
    return dataclasses.replace(revised, revision=revision, **overrides)


def candle(open_time: object = "2026-11-30T12:00:00Z", **overrides: object) -> dict[str, object]:
    """A candle-trigger payload (the README's delivery example)."""
    payload: dict[str, object] = {
        "source": "tradingview",
        "venue": "binance",
        "instrument": "BTCUSDT",
        "interval": "1m",
        "candle_open": open_time,
        "rule": "breakout-v1",
        "side": "buy",
        "price": "97000.5",
        "account": "acc-1",
    }
    payload.update(overrides)
    return payload


def delivery(
    wf: WorkflowRevised,
    payload: Mapping[str, object],
    delivery_id: str,
    received_at_ms: int,
    *,
    channel: str = "webhook",
) -> AdmitDelivery:
    """Key a delivery the way ingest does (identify, or the rejection key)."""
    try:
        occurrence = identify(wf, payload)
    except IdentityError:
        key = rejection_key(wf.subscription, wf.environment, delivery_id)
        source, event_id = str(payload.get("source", "unknown")), None
    else:
        key, source, event_id = (
            occurrence.admission_key,
            occurrence.source,
            occurrence.event_id,
        )
    return AdmitDelivery(
        delivery_id=delivery_id,
        subscription=wf.subscription,
        environment=wf.environment,
        admission_key=key,
        source=source,
        event_id=event_id,
        payload_json=canonical_json(payload),
        received_at_ms=received_at_ms,
        channel=channel,
    )


def rerun_request(
    key: str, run_id: str, request_id: str = "rr-1", reason: str = "research", at: int = 0
) -> AuthorizeRerun:
    return AuthorizeRerun(
        request_id=request_id,
        admission_key=key,
        run_id=run_id,
        reason=reason,
        requested_by="ops@example",
        requested_at_ms=at,
    )


def command_key(command: Command) -> str | None:
    if isinstance(command, Admit):
        return command.delivery.admission_key
    if isinstance(command, Rerun):
        return command.request.admission_key
    if isinstance(command, RecordBranchReport):
        return command.report.admission_key
    return None


class Processor:
    """decide + evolve_all per admission key, like the engine; keeps every event it produced."""

    def __init__(self, *, restart_every_step: bool = False) -> None:
        self.states: dict[str, OccurrenceState] = {}
        self.events: list[AdmissionEvent] = []
        self.by_key: dict[str, list[AdmissionEvent]] = defaultdict(list)
        self.restart_every_step = restart_every_step

    def state(self, key: str) -> OccurrenceState | None:
        return self.states.get(key)

    def handle(self, command: Command, now: int, key: str | None = None) -> list[AdmissionEvent]:
        key = key if key is not None else command_key(command)
        assert key is not None, "CheckTimers needs an explicit key"
        state = self.states.get(key)
        events = decide(state, command, now)
        one_by_one = state
        for event in events:
            one_by_one = evolve(one_by_one, event)
        # The engine folds a decision's events with evolve_all: every test driving this
        # processor also checks that it equals evolving them one at a time.
        state = evolve_all(state, events)
        assert state == one_by_one, (state, one_by_one)
        if state is None:
            self.states.pop(key, None)
        else:
            if self.restart_every_step:
                state = decode_state(encode_state(state))
            self.states[key] = state
        self.events.extend(events)
        self.by_key[key].extend(events)
        return events

    def timers(self, now: int) -> list[AdmissionEvent]:
        out: list[AdmissionEvent] = []
        for key in list(self.states):
            out.extend(self.handle(CheckTimers(), now, key))
        return out

    def restart(self) -> None:
        """Drop in-memory state and restore it from encoded bytes (the changelog)."""
        stored = {key: encode_state(state) for key, state in self.states.items()}
        self.states = {key: decode_state(data) for key, data in stored.items()}


def of_type(events: list[AdmissionEvent], kind: type) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]
