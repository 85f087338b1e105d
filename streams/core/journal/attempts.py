"""Building intents and deciding an attempt: the final re-check before anything may leave.

:func:`attempt_or_expire` is the only place an ``AttemptStarted`` is made. Before it, the
deadline (``now + clock_uncertainty < expires_at``, equality fails) and the authorization
(same strict check against ``authorized_until``) are re-checked, and an action of a journal
restored from an older point is first looked up by its client order id.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import orjson

from schemas.events import ActionExpired, ActionIntended, AttemptStarted, QueryRequested
from streams.core.journal.commands import AcceptDispatch
from streams.core.journal.lifecycle import ActionStatus
from streams.core.journal.model import (
    CLIENT_ORDER_ID,
    NOTIFICATION,
    PRIMARY_SLOTS,
    PROTECTION,
    ActionState,
    JournalPolicy,
    Owner,
    RunJournal,
    action_id_for,
    canonical_json,
    client_order_id_for,
    decimal_of,
    decimal_text,
)

EXPIRED_BEFORE_SEND = "expired_before_send"
AUTHORIZATION_LAPSED = "authorization_lapsed"
OPPOSITE = {"buy": "sell", "sell": "buy"}


def json_object(text: str | None) -> dict[str, Any] | None:
    """The JSON object in ``text``, or ``None`` if absent or not an object."""
    if text is None:
        return None
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def protection_spec(intent: ActionIntended) -> dict[str, Any] | None:
    """The usable protection spec of an entry (a JSON object with a positive stop_price)."""
    spec = json_object(intent.protection_json)
    if spec is None or not _positive(spec.get("stop_price")):
        return None
    return spec


def notification_spec(intent: ActionIntended) -> dict[str, Any] | None:
    """The usable notification spec (a JSON object with a string channel)."""
    spec = json_object(intent.notification_json)
    return spec if spec is not None and isinstance(spec.get("channel"), str) else None


def _positive(value: object) -> bool:
    number = decimal_of(value) if isinstance(value, str) else None
    return number is not None and number > 0


def dispatch_problems(command: AcceptDispatch) -> list[str]:
    """Why a dispatch cannot be sent as it is (empty: it can)."""
    problems: list[str] = []
    if command.kind not in PRIMARY_SLOTS:
        problems.append(f"kind {command.kind!r} is not entry or exit")
    if command.action_id != action_id_for(command.run_id, command.kind):
        problems.append(f"action id {command.action_id!r} is not run id + '.' + kind")
    if not CLIENT_ORDER_ID.fullmatch(client_order_id_for(command.run_id, command.kind)):
        problems.append(f"run id {command.run_id!r} gives no valid client order id")
    if command.side not in OPPOSITE:
        problems.append(f"side {command.side!r} is not buy or sell")
    sizes = [s for s in (command.quantity, command.notional) if s is not None]
    if len(sizes) != 1 or not _positive(sizes[0]):
        problems.append("exactly one of quantity and notional must be a positive decimal")
    if command.limit_price is not None and not _positive(command.limit_price):
        problems.append(f"limit price {command.limit_price!r} is not a positive decimal")
    if json_object(command.params_json) is None:
        problems.append("params_json is not a JSON object")
    for name in ("instrument", "account"):
        if not getattr(command, name):
            problems.append(f"{name} is missing (it comes from the run's payload)")
    return problems


def dispatch_intent(command: AcceptDispatch, now: int) -> ActionIntended:
    """The intent of a dispatched entry or exit, exactly as authorized."""
    policy = command.policy
    return ActionIntended(
        action_id=command.action_id,
        run_id=command.run_id,
        slot=command.kind,
        client_order_id=client_order_id_for(command.run_id, command.kind),
        side=command.side,
        quantity=command.quantity,
        notional=command.notional,
        limit_price=command.limit_price,
        params_json=command.params_json,
        protection_json=command.protection_json,
        notification_json=command.notification_json,
        instrument=command.instrument,
        venue=command.venue,
        account=command.account,
        environment=command.environment,
        generation=command.generation,
        expires_at_ms=command.expires_at_ms,
        source_time_ms=command.source_time_ms,
        validity_source_time=command.validity_source_time,
        validity_window_ms=command.validity_window_ms,
        clock_uncertainty_ms=command.clock_uncertainty_ms,
        workflow_revision=command.workflow_revision,
        authorized_until_ms=command.authorized_until_ms,
        depends_on=None,
        sized_from_json=None,
        recv_window_ms=policy.recv_window_ms,
        quiet_period_ms=policy.quiet_period_ms,
        send_timeout_ms=policy.send_timeout_ms,
        lookup_interval_ms=policy.lookup_interval_ms,
        reconciliation_budget_ms=policy.reconciliation_budget_ms,
        followup_window_ms=policy.followup_window_ms,
        dispatched_at_ms=command.dispatched_at_ms,
        intended_at_ms=now,
    )


def followup_intent(
    primary: ActionIntended, slot: str, now: int, *, params: dict[str, Any], **order: Any
) -> ActionIntended:
    """A protection or notification planned by the journal after ``primary``.

    Its deadline is ``now + followup_window`` (the entry's deadline governs only the entry:
    a protection must still be placed for exposure that exists). ``order`` sets side,
    quantity, limit_price and sized_from_json.
    """
    return ActionIntended(
        action_id=action_id_for(primary.run_id, slot),
        run_id=primary.run_id,
        slot=slot,
        client_order_id=client_order_id_for(primary.run_id, slot),
        side=order.get("side"),
        quantity=order.get("quantity"),
        notional=None,
        limit_price=order.get("limit_price"),
        params_json=canonical_json(params),
        protection_json=None,
        notification_json=None,
        instrument=primary.instrument,
        venue=primary.venue,
        account=primary.account,
        environment=primary.environment,
        generation=primary.generation,
        expires_at_ms=now + primary.followup_window_ms,
        source_time_ms=now,
        validity_source_time=f"{slot}_intent",
        validity_window_ms=primary.followup_window_ms,
        clock_uncertainty_ms=primary.clock_uncertainty_ms,
        workflow_revision=primary.workflow_revision,
        authorized_until_ms=None,
        depends_on=primary.action_id,
        sized_from_json=order.get("sized_from_json"),
        recv_window_ms=primary.recv_window_ms,
        quiet_period_ms=primary.quiet_period_ms,
        send_timeout_ms=primary.send_timeout_ms,
        lookup_interval_ms=primary.lookup_interval_ms,
        reconciliation_budget_ms=primary.reconciliation_budget_ms,
        followup_window_ms=primary.followup_window_ms,
        dispatched_at_ms=None,
        intended_at_ms=now,
    )


def protection_intent(primary: ActionIntended, sizing: ActionState, now: int) -> ActionIntended:
    """The protection of ``primary``, sized from the recorded exposure (never the proposal)."""
    exposure = sizing.exposure
    spec = protection_spec(primary) or {}
    assert exposure is not None and primary.side is not None  # the plan checked both
    return followup_intent(
        primary,
        PROTECTION,
        now,
        params=spec,
        side=OPPOSITE[primary.side],
        quantity=exposure.sized_quantity,
        limit_price=spec.get("limit_price") if isinstance(spec.get("limit_price"), str) else None,
        sized_from_json=canonical_json(
            {
                "asset": exposure.asset,
                "exposure_quantity": exposure.exposure_quantity,
                "entry_executed_quantity": exposure.entry_executed_quantity,
                "observed_at_ms": exposure.observed_at_ms,
            }
        ),
    )


def notification_intent(state: RunJournal, primary: ActionIntended, now: int) -> ActionIntended:
    """The run's notification, reporting every other action's status at ``now``."""
    spec = notification_spec(primary) or {}
    outcomes = {a.slot: a.status.value for a in state.actions if a.slot != NOTIFICATION}
    return followup_intent(primary, NOTIFICATION, now, params={**spec, "outcomes": outcomes})


def request_json(intent: ActionIntended) -> str:
    """Exactly what is sent for ``intent`` (the venue adapter maps it to the venue's API)."""
    params = json_object(intent.params_json) or {}
    if intent.slot == NOTIFICATION:
        return canonical_json({"kind": NOTIFICATION, **params})
    body: dict[str, Any] = {
        "kind": intent.slot,
        "side": intent.side,
        "type": "limit" if intent.limit_price is not None else "market",
        "quantity": intent.quantity,
        "notional": intent.notional,
        "limit_price": intent.limit_price,
    }
    body["protection" if intent.slot == PROTECTION else "params"] = params
    return canonical_json(body)


def attempt_or_expire(
    state: RunJournal, action: ActionState, now: int, owner: Owner
) -> ActionExpired | QueryRequested | AttemptStarted:
    """The next step of an unsent action (``intended``, or ``absent`` after a proven absence).

    1. A journal restored from an older point: look the client order id up first (the old
       journal may predate an attempt), whatever the deadline says.
    2. Deadline, then authorization: a lapsed one is ``ActionExpired``, never sent.
    3. Otherwise a new attempt, under the action's one client order id.
    """
    intent = action.intent
    assert intent is not None and action.status in (ActionStatus.INTENDED, ActionStatus.ABSENT)
    fence = state.absence_not_before_ms
    if fence is not None and (action.verified_at_ms is None or action.verified_at_ms < fence):
        return query(intent, action, "order", "verify_before_send", now)
    margin = now + intent.clock_uncertainty_ms
    reason = None
    if not margin < intent.expires_at_ms:
        reason = EXPIRED_BEFORE_SEND
    elif intent.authorized_until_ms is not None and not margin < intent.authorized_until_ms:
        reason = AUTHORIZATION_LAPSED
    if reason is not None:
        return ActionExpired(
            action_id=intent.action_id,
            run_id=intent.run_id,
            slot=intent.slot,
            reason=reason,
            attempts=len(action.attempts),
            expires_at_ms=intent.expires_at_ms,
            authorized_until_ms=intent.authorized_until_ms,
            clock_uncertainty_ms=intent.clock_uncertainty_ms,
            checked_at_ms=now,
        )
    policy = JournalPolicy.of(intent)
    number = len(action.attempts) + 1
    return AttemptStarted(
        action_id=intent.action_id,
        run_id=intent.run_id,
        slot=intent.slot,
        attempt=number,
        client_order_id=intent.client_order_id,
        venue=intent.venue,
        account=intent.account,
        instrument=intent.instrument,
        request_json=request_json(intent),
        attempted_at_ms=now,
        recv_window_ms=policy.recv_window_ms,
        send_by_ms=min(
            now + policy.recv_window_ms, intent.expires_at_ms - intent.clock_uncertainty_ms
        ),
        absence_after_ms=(
            now + policy.recv_window_ms + intent.clock_uncertainty_ms + policy.quiet_period_ms
        ),
        owner_instance=owner.instance,
        owner_generation=owner.generation,
        reason="first" if number == 1 else "after_proven_absence",
    )


def query(
    intent: ActionIntended, action: ActionState | None, kind: str, reason: str, now: int
) -> QueryRequested:
    """The next query of ``action`` (``None``: a protection not sized yet, from ``intent``)."""
    slot = action.slot if action is not None else PROTECTION
    return QueryRequested(
        action_id=action_id_for(intent.run_id, slot),
        run_id=intent.run_id,
        slot=slot,
        query=kind,
        query_number=(action.queries if action is not None else 0) + 1,
        client_order_id=client_order_id_for(intent.run_id, slot),
        venue=intent.venue,
        account=intent.account,
        instrument=intent.instrument,
        reason=reason,
        requested_at_ms=now,
    )


def sized_quantity(exposure: Decimal, executed: Decimal, step: Decimal | None = None) -> str:
    """What a protection covers: the venue-reported exposure, capped at what the entry's fills
    brought the account (net of commission charged in the asset): an account may hold more of
    the asset than this run bought, and another run's protection may be about to take it.

    Rounded down to a whole number of ``step`` (the symbol's lot step) when one is given: a
    venue refuses any other quantity, and rounding up would sell what the run did not buy.
    """
    covered = max(Decimal(0), min(exposure, executed))
    if step is not None and step > 0:
        covered = (covered // step) * step
    return decimal_text(covered)
