"""Identities, the venue timing policy and the journal state of one run.

The state is a fold of the run's journal records (:func:`streams.core.journal.evolve`): it
keeps the records themselves (the intent, every attempt, the latest definitive receipt), so a
decision can always say which record it relied on, and a recovery can name them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import TypeAlias

import orjson

from schemas.events import (
    ActionExpired,
    ActionHeld,
    ActionIntended,
    AttemptStarted,
    DispatchRefused,
    ExposureRecorded,
    HoldResolved,
    JournalEvicted,
    QueryRequested,
    ReceiptRecorded,
    RecoveryReceiptRecorded,
    RecoveryStarted,
    RunCheckpointed,
)
from streams.core.journal.errors import InvalidPolicy
from streams.core.journal.lifecycle import ActionStatus

ENTRY, EXIT, PROTECTION, NOTIFICATION = "entry", "exit", "protection", "notification"
PRIMARY_SLOTS = (ENTRY, EXIT)
SLOT_CODES = {ENTRY: "E", EXIT: "X", PROTECTION: "P", NOTIFICATION: "N"}
CLIENT_ORDER_ID = re.compile(r"[.A-Z:/a-z0-9_-]{1,36}")
"""Binance's allowed client order id set and length."""

JournalEvent: TypeAlias = (
    ActionIntended
    | AttemptStarted
    | ReceiptRecorded
    | ActionExpired
    | ActionHeld
    | HoldResolved
    | RunCheckpointed
    | QueryRequested
    | ExposureRecorded
    | RecoveryStarted
    | RecoveryReceiptRecorded
    | JournalEvicted
    | DispatchRefused
)
"""Every record the journal core writes (topic ``journal``, key run id)."""

INVALID_DISPATCH = "invalid_dispatch"
"""``ActionHeld.reason`` of a dispatch the core cannot use."""

LIVE_JOURNAL = "live"
"""``RecoverRun.journal_origin`` of the committed journal; any other value means "restored
from an older point" and makes every action verified by lookup before it is sent."""


def action_id_for(run_id: str, slot: str) -> str:
    """``f"{run_id}.{slot}"``: one action per run and slot."""
    return f"{run_id}.{slot}"


def slot_of(action_id: str) -> str:
    """The slot part of an action id (after the last dot)."""
    return action_id.rpartition(".")[2]


def client_order_id_for(run_id: str, slot: str) -> str:
    """The venue's client order id of every attempt of the action: ``run_id[4:]-CODE``."""
    return f"{run_id[4:]}-{SLOT_CODES.get(slot, '?')}"


def canonical_json(value: object) -> str:
    """Canonical JSON text (sorted keys, no spaces) of ``value``."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def decimal_of(text: str | None) -> Decimal | None:
    """A finite decimal from a decimal string, or ``None`` if absent or not a number."""
    if text is None:
        return None
    try:
        value = Decimal(text)
    except (InvalidOperation, ValueError):
        return None
    return value if value.is_finite() else None


def decimal_text(value: Decimal) -> str:
    """The plain decimal string of ``value`` (no exponent, no trailing zeros)."""
    text = format(value.normalize(), "f")
    return "0" if text in ("-0", "") else text


@dataclass(frozen=True)
class JournalPolicy:
    """How the venue behaves, as far as recovery depends on it; frozen into every intent.

    * ``recv_window_ms``: the venue refuses a request older than this (its ``recvWindow``);
    * ``quiet_period_ms``: how long the venue may say "order does not exist" about an order
      it accepted; "not found" proves absence only for a lookup sent at or after
      ``attempt time + recv window + clock uncertainty + quiet period``;
    * ``send_timeout_ms``: a send without an answer after this is treated as unknown;
    * ``lookup_interval_ms``: time between lookups while an outcome is unknown;
    * ``reconciliation_budget_ms``: from the attempt, how long lookups go on before the action
      is held (never before absence could have been proven plus one interval);
    * ``followup_window_ms``: deadline of a protection or notification from its intent.
    """

    recv_window_ms: int = 5_000
    quiet_period_ms: int = 30_000
    send_timeout_ms: int = 10_000
    lookup_interval_ms: int = 5_000
    reconciliation_budget_ms: int = 120_000
    followup_window_ms: int = 300_000

    def __post_init__(self) -> None:
        values = vars(self)
        bad = [name for name, value in values.items() if not isinstance(value, int) or value < 0]
        if bad or self.lookup_interval_ms == 0 or self.recv_window_ms == 0:
            raise InvalidPolicy(
                f"journal policy values must be positive integers (ms); got {values}"
            )
        floor = self.recv_window_ms + self.quiet_period_ms + self.lookup_interval_ms
        if self.reconciliation_budget_ms < floor:
            raise InvalidPolicy(
                f"reconciliation_budget_ms {self.reconciliation_budget_ms} ends before absence "
                f"can be proven (recv window + quiet period + one lookup interval = {floor} ms); "
                "raise it"
            )

    @classmethod
    def of(cls, intent: ActionIntended) -> JournalPolicy:
        """The policy an intent was recorded with."""
        return cls(
            recv_window_ms=intent.recv_window_ms,
            quiet_period_ms=intent.quiet_period_ms,
            send_timeout_ms=intent.send_timeout_ms,
            lookup_interval_ms=intent.lookup_interval_ms,
            reconciliation_budget_ms=intent.reconciliation_budget_ms,
            followup_window_ms=intent.followup_window_ms,
        )


@dataclass(frozen=True)
class Owner:
    """The gateway instance deciding, and the consumer-group generation it owns the run in."""

    instance: str
    generation: int


@dataclass(frozen=True)
class ActionState:
    """One action's journal entry.

    ``receipt`` is the latest *definitive* receipt (acknowledged, filled, rejected, absent) of
    the current attempt; ``unknown`` observations only move ``last_observed_at_ms``.
    ``reconcile_since_ms`` starts the reconciliation budget (the attempt time, or an
    operator's retry). ``verified_at_ms`` is when a lookup last established the order's
    presence or absence (it must be at or after a restored journal's fence before a send).
    """

    action_id: str
    slot: str
    status: ActionStatus
    intent: ActionIntended | None = None
    attempts: tuple[AttemptStarted, ...] = ()
    receipt: ReceiptRecorded | None = None
    last_observed_at_ms: int | None = None
    queries: int = 0
    last_query_at_ms: int | None = None
    reconcile_since_ms: int | None = None
    hold: ActionHeld | None = None
    held_from: ActionStatus | None = None
    exposure: ExposureRecorded | None = None
    verified_at_ms: int | None = None
    invalid: bool = False
    """Held as ``invalid_dispatch`` at least once: never sent, never followed up."""

    @property
    def attempt(self) -> AttemptStarted | None:
        """The current (latest) attempt, or ``None`` if never attempted."""
        return self.attempts[-1] if self.attempts else None

    def absence_threshold(self, fence_ms: int | None) -> int:
        """The earliest query time at which "not found" proves the current attempt absent."""
        attempt = self.attempt
        own = attempt.absence_after_ms if attempt is not None else 0
        return max(own, fence_ms or 0)

    def executed(self) -> Decimal:
        """Executed quantity established by the receipt (0 if none)."""
        if self.receipt is None or self.receipt.outcome not in ("acknowledged", "filled"):
            return Decimal(0)
        return decimal_of(self.receipt.executed_quantity) or Decimal(0)

    def net_executed(self, asset: str | None) -> Decimal:
        """What the account received: the executed quantity less the commission the venue
        charged in ``asset`` (the instrument's base asset), from the receipt's fills; the
        executed quantity when the receipt lists no fills or no asset is known."""
        executed = self.executed()
        fills = self.receipt.fills_json if self.receipt is not None else None
        if asset is None or fills is None or executed <= 0:
            return executed
        try:
            listed = orjson.loads(fills)
        except orjson.JSONDecodeError:
            return executed
        fee = Decimal(0)
        for fill in listed if isinstance(listed, list) else ():
            if isinstance(fill, dict) and fill.get("commission_asset") == asset:
                commission = fill.get("commission")
                fee += (decimal_of(commission) if isinstance(commission, str) else None) or 0
        return max(Decimal(0), executed - fee)


@dataclass(frozen=True)
class RunJournal:
    """Everything the gateway keeps for one run (one key of its changelog).

    ``since_checkpoint`` names the journal records newer than ``checkpoint``; ``recovery`` is
    the open recovery (at most one), ``recovery_evidence`` the observations made since it
    started (canonical JSON each). ``absence_not_before_ms`` is the fence of a journal
    restored from an older point: no "not found" from before it proves anything.
    """

    run_id: str
    actions: tuple[ActionState, ...] = ()
    checkpoint: RunCheckpointed | None = None
    since_checkpoint: tuple[str, ...] = ()
    recovery: RecoveryStarted | None = None
    recovery_evidence: tuple[str, ...] = ()
    recoveries: int = 0
    absence_not_before_ms: int | None = None
    updated_at_ms: int = 0

    def action(self, action_id: str) -> ActionState | None:
        """The journal entry of ``action_id``, or ``None``."""
        for action in self.actions:
            if action.action_id == action_id:
                return action
        return None

    @property
    def primary(self) -> ActionState | None:
        """The run's entry or exit (the action the gate dispatched), or ``None``."""
        for action in self.actions:
            if action.slot in PRIMARY_SLOTS:
                return action
        return None
