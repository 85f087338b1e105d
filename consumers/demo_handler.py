"""The demonstration handler ``sluicegate worker`` and ``make run`` serve branches with."""

from __future__ import annotations

import time

from consumers.branch_tasks import Proposal, Task

DEMO_DELAY_FIELD = "demo_approval_delay_ms"
"""Payload field that makes the demonstration handler's approvals take that long (at most
4 s): how ``make run`` keeps a candidate pending while a newer one arrives."""


def demo_handler(task: Task) -> dict[str, object] | Proposal:
    """The handler of ``sluicegate worker``: records what it saw, like a journal branch, and
    from the proposing slot proposes a small entry on the signal's side, with a take-profit
    protection and a notification. An approving slot
    takes ``demo_approval_delay_ms`` of the payload (at most 4 s) before it completes."""
    delay = task.payload.get(DEMO_DELAY_FIELD)
    if task.action_role == "approve" and isinstance(delay, int) and not isinstance(delay, bool):
        time.sleep(min(max(delay, 0), 4_000) / 1000)
    seen: dict[str, object] = {
        "slot": task.slot,
        "instrument": task.payload.get("instrument"),
        "side": task.payload.get("side"),
        "attempt": task.attempt,
    }
    if task.action_role == "propose":
        side = task.payload.get("side")
        return Proposal(
            kind="entry",
            side=side if side in ("buy", "sell") else "buy",
            # 0.01 less the venue's 0.1 % commission is still a multiple of BTCUSDT's lot
            # step (0.00001), so the protection sized from it passes the venue's filter.
            quantity="0.01",
            params={"rule": task.payload.get("rule")},
            # A resting take-profit (sized later from the exposure the venue reports) and a
            # report to the operators' channel, so the demo shows a run's three actions.
            protection={"kind": "take_profit", "limit_price": "99000.00", "stop_price": "99000.00"},
            notification={"channel": "ops", "text": "entry placed by the demo worker"},
            result=seen,
        )
    return seen
