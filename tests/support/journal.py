"""A pure harness for the journal core: the engine, the gateway shell and a venue, in memory.

:class:`Venue` behaves like the paper venue where recovery depends on it: a request older than
its recv window is refused, a client order id is unique among *open* orders only, and an
accepted order is "not found" by lookups for ``visibility_delay_ms`` (less than the policy's
quiet period). It counts every order it ever accepted per client order id: the number that
must never exceed one.

:class:`World` folds ``decide`` + ``evolve`` like the engine, queues ``effects_of`` the
committed records like the shell, performs them against the venue only when told to
(optionally losing answers or requests), and can crash: drop what was not performed and
truncate the history, never before a record whose effect was already performed (a record's
effect happens only after it committed). Time is a controllable clock.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import orjson

from schemas.commands import ExposureObserved, LookupAnswered, RecoverRun, VenueAnswered
from streams.core.durations import parse_time
from streams.core.journal import (
    AcceptDispatch,
    CheckTimers,
    Command,
    EffectRequest,
    ExposureRequest,
    JournalEvent,
    JournalPolicy,
    LookupRequest,
    Owner,
    RunJournal,
    SendRequest,
    decide,
    effects_of,
    evolve,
    next_due_ms,
)

T0 = parse_time("2026-11-30T09:00:00Z")
"""09:00:00 of the article's fixture."""
SECOND = 1_000
MINUTE = 60 * SECOND
RUN = "run-3fa2" + "0" * 18 + "c9"
ENTRY_ID, PROTECTION_ID, NOTIFICATION_ID = (
    f"{RUN}.entry",
    f"{RUN}.protection",
    f"{RUN}.notification",
)
E_CLIENT = RUN[4:] + "-E"
POLICY = JournalPolicy(
    recv_window_ms=5 * SECOND,
    quiet_period_ms=30 * SECOND,
    send_timeout_ms=10 * SECOND,
    lookup_interval_ms=5 * SECOND,
    reconciliation_budget_ms=2 * MINUTE,
    followup_window_ms=10 * MINUTE,
)
UNCERTAINTY = 250
PROTECTION_SPEC = '{"kind":"stop_loss","stop_price":"95000"}'
NOTIFICATION_SPEC = '{"channel":"ops","text":"entry report"}'


def dispatch(**overrides: Any) -> AcceptDispatch:
    """E1 of the fixture: buy 0.5 BTCUSDT at market, with a protection and a notification."""
    values: dict[str, Any] = {
        "action_id": ENTRY_ID,
        "run_id": RUN,
        "kind": "entry",
        "side": "buy",
        "quantity": "0.5",
        "notional": None,
        "limit_price": None,
        "params_json": "{}",
        "protection_json": PROTECTION_SPEC,
        "notification_json": NOTIFICATION_SPEC,
        "instrument": "BTCUSDT",
        "venue": "paper",
        "account": "acc-1",
        "environment": "paper",
        "generation": 81,
        "expires_at_ms": T0 + 10 * MINUTE,
        "source_time_ms": T0 - 2 * SECOND,
        "validity_source_time": "candle_close",
        "validity_window_ms": 10 * MINUTE,
        "clock_uncertainty_ms": UNCERTAINTY,
        "workflow_revision": 3,
        "dispatched_at_ms": T0,
        "authorized_until_ms": None,
        "policy": POLICY,
    }
    values.update(overrides)
    return AcceptDispatch(**values)


def recover_run(at: int, *, origin: str = "live", request: str = "rr-1") -> RecoverRun:
    return RecoverRun(request, RUN, "ops@example", "restart", at, origin)


@dataclass
class Order:
    client_order_id: str
    venue_order_id: str
    slot: str
    status: str
    executed: Decimal
    accepted_at_ms: int


@dataclass
class Venue:
    """An in-memory venue (see the module docstring). ``behaviour[slot]``: ``fill`` (filled
    at once), ``rest`` (acknowledged, open) or ``reject``."""

    visibility_delay_ms: int = 2 * SECOND
    behaviour: dict[str, str] = field(default_factory=dict)
    fee: Decimal = Decimal("0.001")
    lot_step: str | None = None
    orders: list[Order] = field(default_factory=list)
    accepted: Counter[str] = field(default_factory=Counter)
    next_id: int = 77

    def submit(self, request: SendRequest, now: int) -> VenueAnswered:
        def answer(outcome: str, **extra: Any) -> VenueAnswered:
            values: dict[str, Any] = dict.fromkeys(
                ("venue_order_id", "status", "executed_quantity", "fills_json", "error_code"),
                None,
            )
            values.update(extra)
            return VenueAnswered(
                run_id=request.run_id,
                action_id=request.action_id,
                attempt=request.attempt,
                client_order_id=request.client_order_id,
                outcome=outcome,
                detail=None,
                observed_at_ms=now,
                **values,
            )

        if now > request.timestamp_ms + request.recv_window_ms:
            return answer("rejected", error_code="outside_recv_window")
        if any(
            o.client_order_id == request.client_order_id and o.status == "NEW" for o in self.orders
        ):
            return answer("rejected", error_code="duplicate_client_order_id")
        mode = self.behaviour.get(request.slot, "rest" if request.slot == "protection" else "fill")
        if mode == "reject":
            return answer("rejected", error_code="insufficient_balance")
        body = orjson.loads(request.request_json)
        quantity = Decimal(body.get("quantity") or "0")
        filled = mode == "fill" and request.slot != "notification"
        order = Order(
            request.client_order_id,
            f"O{self.next_id}",
            request.slot,
            "FILLED" if filled else "NEW",
            quantity if filled else Decimal(0),
            now,
        )
        self.next_id += 1
        self.orders.append(order)
        self.accepted[request.client_order_id] += 1
        return answer("filled" if filled else "acknowledged", **self.view(order))

    def view(self, order: Order) -> dict[str, Any]:
        fills = [{"price": "97000", "qty": str(order.executed)}] if order.executed else []
        return {
            "venue_order_id": order.venue_order_id,
            "status": order.status,
            "executed_quantity": str(order.executed),
            "fills_json": orjson.dumps(fills).decode(),
        }

    def lookup(self, request: LookupRequest, queried_at: int) -> LookupAnswered:
        visible = [
            o
            for o in self.orders
            if o.client_order_id == request.client_order_id
            and queried_at >= o.accepted_at_ms + self.visibility_delay_ms
        ]
        found = visible[-1] if visible else None
        details: dict[str, Any] = dict.fromkeys(
            ("venue_order_id", "status", "executed_quantity", "fills_json"), None
        )
        outcome = "not_found"
        if found is not None:
            outcome = "filled" if found.status == "FILLED" else "acknowledged"
            details = self.view(found)
        return LookupAnswered(
            run_id=request.run_id,
            action_id=request.action_id,
            query_number=request.query_number,
            client_order_id=request.client_order_id,
            outcome=outcome,
            detail=None,
            queried_at_ms=queried_at,
            observed_at_ms=queried_at,
            **details,
        )

    def exposure(self, request: ExposureRequest, queried_at: int) -> ExposureObserved:
        bought = sum((o.executed for o in self.orders if o.slot == "entry"), start=Decimal(0))
        held = bought * (1 - self.fee)
        return ExposureObserved(
            run_id=request.run_id,
            action_id=request.action_id,
            query_number=request.query_number,
            outcome="observed",
            asset="BTC",
            exposure_quantity=format(held.normalize(), "f") if held else "0",
            detail=None,
            queried_at_ms=queried_at,
            observed_at_ms=queried_at,
            lot_step=self.lot_step,
        )


Fault = Callable[[EffectRequest], str]
"""How an effect goes: ``ok``; ``lost`` (performed, answer lost); ``unknown`` (performed,
answered unknown); ``unreached`` (never reaches the venue, answered unknown); ``silent``
(never reaches the venue, no answer)."""


def reliable(_: EffectRequest) -> str:
    return "ok"


class World:
    """The engine + shell + venue around one run's journal (see the module docstring)."""

    def __init__(self, venue: Venue | None = None, *, now: int = T0) -> None:
        self.venue = venue or Venue()
        self.now = now
        self.owner = Owner("gateway-1", 1)
        self.history: list[JournalEvent] = []
        self.state: RunJournal | None = None
        self.effects: list[tuple[int, EffectRequest]] = []
        self.answers: list[Command] = []
        self.sends: list[SendRequest] = []
        self.effect_floor = 0
        self.fault: Fault = reliable
        self.crashes = 0
        self.dispatched: AcceptDispatch | None = None
        self.restored_from_backup = False
        self.decisions: list[int] = []
        """Records per decision, in order (each decision is one transaction)."""

    # ---------------------------------------------------------------- engine
    def decide(self, command: Command) -> list[JournalEvent]:
        """Decide ``command``, then every step due at once after it (each step is a decision,
        and so a transaction, of its own, as the engine fires timers due at once): the
        records of all of them, in order."""
        events = self.decide_one(command)
        while True:
            due = next_due_ms(self.state)
            if due is None or due > self.now:
                return events
            step = self.decide_one(CheckTimers())
            assert step, f"timer due at {due} <= {self.now} but CheckTimers did nothing"
            events.extend(step)

    def decide_one(self, command: Command) -> list[JournalEvent]:
        """One decision (one transaction of the engine)."""
        if isinstance(command, AcceptDispatch):
            self.dispatched = command
        events = decide(self.state, command, self.now, self.owner)
        base = len(self.history)
        for event in events:
            self.state = evolve(self.state, event)
        self.history.extend(events)
        self.decisions.append(len(events))
        for offset, event in enumerate(events):
            self.effects.extend((base + offset, e) for e in effects_of([event]))
        return list(events)

    def timers(self) -> list[JournalEvent]:
        due = next_due_ms(self.state)
        if due is None or due > self.now:
            return []
        events = self.decide(CheckTimers())
        assert events, f"timer due at {due} <= {self.now} but CheckTimers did nothing"
        return events

    # ---------------------------------------------------------------- shell
    def perform(self) -> None:
        """Perform every committed effect (as the shell does after the commit)."""
        effects, self.effects = self.effects, []
        for index, effect in effects:
            self.effect_floor = max(self.effect_floor, index + 1)
            mode = self.fault(effect)
            answer = self._perform(effect, mode)
            if answer is not None:
                self.answers.append(answer)

    def _perform(self, effect: EffectRequest, mode: str) -> Command | None:
        if isinstance(effect, SendRequest):
            if effect.owner_generation != self.owner.generation or self.now >= effect.send_by_ms:
                return _not_sent(effect, self.now)
            if mode in ("unreached", "silent"):
                return None if mode == "silent" else _unknown_send(effect, self.now)
            # The core re-attempts only after proving every earlier attempt absent, so the
            # venue must never have accepted an order under this client order id before.
            assert self.venue.accepted[effect.client_order_id] == 0, (
                f"second send of {effect.action_id} while an earlier attempt is live"
            )
            self.sends.append(effect)
            answer = self.venue.submit(effect, self.now)
            return {"ok": answer, "unknown": _unknown_send(effect, self.now)}.get(mode)
        if mode in ("lost", "silent"):
            return None
        if isinstance(effect, LookupRequest):
            if mode in ("unknown", "unreached"):
                return _unknown_lookup(effect, self.now)
            return self.venue.lookup(effect, self.now)
        if mode in ("unknown", "unreached"):
            return dataclasses.replace(
                self.venue.exposure(effect, self.now), outcome="unknown", exposure_quantity=None
            )
        return self.venue.exposure(effect, self.now)

    def deliver(self) -> None:
        answers, self.answers = self.answers, []
        for answer in answers:
            self.decide(answer)

    # ---------------------------------------------------------------- faults
    def crash(self, keep: int | None = None, *, recover: bool = True, origin: str = "live") -> None:
        """Kill the gateway: unperformed effects and undelivered answers are gone; the
        history is cut to ``keep`` records (never below what was already performed); a new
        owner restores it by folding the records and (``recover``) runs ``RecoverRun``, or,
        if no record is left, consumes the dispatch again."""
        if keep is not None:
            # A restore from a backup (origin other than live) may lose committed records,
            # effects and all: that is what it is. A crash never uncommits anything.
            if origin == "live":
                assert keep >= self.effect_floor, "cannot uncommit a record whose effect happened"
            self.history = self.history[:keep]
            self.effect_floor = min(self.effect_floor, keep)
        self.effects.clear()
        self.answers.clear()
        self.crashes += 1
        self.owner = Owner(f"gateway-{self.crashes + 1}", self.owner.generation + 1)
        self.state = fold(self.history)
        if origin != "live":
            self.restored_from_backup = True
        if self.state is None and self.dispatched is not None:
            # Nothing of the dispatch committed, so neither did its input offset: the gate's
            # record is consumed again (marked when the journal is a restored backup).
            self.decide(
                dataclasses.replace(
                    self.dispatched,
                    journal_origin="backup" if self.restored_from_backup else "live",
                )
            )
        elif self.state is not None and self._fence_missing():
            # The shell's start-up flag: a journal restored from a backup is announced on
            # every restart until a recovery carrying it has committed.
            self.decide(recover_run(self.now, origin="backup", request=f"rr-{self.crashes}"))
        elif recover and self.state is not None:
            self.decide(recover_run(self.now, origin=origin, request=f"rr-{self.crashes}"))

    def _fence_missing(self) -> bool:
        return (
            self.restored_from_backup
            and self.state is not None
            and self.state.absence_not_before_ms is None
        )

    # ---------------------------------------------------------------- driving
    def step(self, ms: int = 0) -> None:
        """Perform and answer what is committed, let ``ms`` pass, fire due timers and
        perform what they committed (the shell acts right after each commit)."""
        self.perform()
        self.deliver()
        self.now += ms
        self.timers()
        self.perform()
        self.deliver()

    def settle(self, limit_ms: int = 60 * MINUTE) -> None:
        """Run with a reliable venue until nothing is pending and no timer is set."""
        self.fault = reliable
        end = self.now + limit_ms
        for _ in range(10_000):
            self.perform()
            self.deliver()
            if self.effects or self.answers:
                continue
            if self.timers():
                continue
            due = next_due_ms(self.state)
            if due is None:
                return
            assert due <= end, f"still busy at the end of the time limit (due {due})"
            self.now = max(self.now, due)
        raise AssertionError("the journal did not settle")

    # ---------------------------------------------------------------- reading
    def of(self, kind: type) -> list[Any]:
        return [e for e in self.history if isinstance(e, kind)]

    def status(self, action_id: str) -> str | None:
        action = self.state.action(action_id) if self.state is not None else None
        return None if action is None else action.status.value


def decide_steps(
    state: RunJournal | None, command: Command, now: int, owner: Owner
) -> list[JournalEvent]:
    """``decide`` and then every plan step due at once at ``now``, as the engine takes them
    (each a decision of its own): all their records, in order."""
    events = list(decide(state, command, now, owner))
    for event in events:
        state = evolve(state, event)
    while True:
        due = next_due_ms(state)
        if due is None or due > now:
            return events
        step = decide(state, CheckTimers(), now, owner)
        assert step, f"timer due at {due} <= {now} but CheckTimers did nothing"
        for event in step:
            state = evolve(state, event)
        events.extend(step)


def fold(events: Iterable[JournalEvent]) -> RunJournal | None:
    state: RunJournal | None = None
    for event in events:
        state = evolve(state, event)
    return state


def _not_sent(effect: SendRequest, now: int) -> VenueAnswered:
    return VenueAnswered(
        effect.run_id,
        effect.action_id,
        effect.attempt,
        effect.client_order_id,
        "not_sent",
        None,
        None,
        None,
        None,
        None,
        "stale attempt: not sent",
        now,
    )


def _unknown_send(effect: SendRequest, now: int) -> VenueAnswered:
    return VenueAnswered(
        effect.run_id,
        effect.action_id,
        effect.attempt,
        effect.client_order_id,
        "unknown",
        None,
        None,
        None,
        None,
        None,
        "execution status unknown",
        now,
    )


def _unknown_lookup(effect: LookupRequest, now: int) -> LookupAnswered:
    return LookupAnswered(
        effect.run_id,
        effect.action_id,
        effect.query_number,
        effect.client_order_id,
        "unknown",
        None,
        None,
        None,
        None,
        "lookup timed out",
        now,
        now,
    )


def sends_per_action(sends: Sequence[SendRequest]) -> Counter[str]:
    return Counter(s.action_id for s in sends)
