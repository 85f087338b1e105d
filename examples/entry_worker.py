#!/usr/bin/env python3
"""A branch worker that proposes entries: run it beside ``sluicegate serve --only ...``.

    .venv/bin/python examples/entry_worker.py            # serves analysis and signal

It serves the example workflow's approving slot (``analysis``: a toy risk check) and its
proposing slot (``signal``: proposes a limit entry on the signal's side). The SDK skips a
task that is already out of time when it is taken (``expired_at_dequeue``) and gives each
handler the time left, ``task.remaining(now)``, with the run's clock uncertainty.
"""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from consumers.branch_worker import BranchError, BranchWorker, Proposal, Task  # noqa: E402
from streams.settings import load_settings  # noqa: E402

MAX_PRICE = 250_000


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def handle(task: Task) -> dict[str, object] | Proposal:
    price = str(task.payload.get("price", "0"))
    if task.slot == "analysis":
        # The approval: refuse absurd prices (a failed approval withdraws the candidate).
        if float(price) > MAX_PRICE:
            raise BranchError(f"price {price} above the {MAX_PRICE} limit")
        return {"checked": "price", "left_ms": task.remaining(now_ms())}
    side = str(task.payload.get("side", "buy"))
    return Proposal(
        kind="entry",
        side=side,
        quantity="0.001",
        limit_price=price,
        params={"rule": task.payload.get("rule"), "left_ms": task.remaining(now_ms())},
        protection={"kind": "stop_loss", "stop_price": price},
    )


def main() -> int:
    worker = BranchWorker(
        load_settings(),
        handle,
        slots=["analysis", "signal"],
        group="entry-workers",
        name="entry-worker",
    )
    signal.signal(signal.SIGTERM, lambda *_: worker.stop())
    signal.signal(signal.SIGINT, lambda *_: worker.stop())
    worker.run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
