"""A Faust agent that serves branch slots with the SDK's contract.

For each ``BranchLaunched`` / ``BranchRelaunched`` of a served slot the agent runs
:func:`consumers.branch_tasks.take_task` (deadline checked when the task is taken: an
expired task is reported skipped, ``expired_at_dequeue``, and the handler is never called),
sends ``ReportBranchStarted`` to ``branch-results`` keyed by admission key and waits for the
broker's acknowledgement, runs the handler (:func:`~consumers.branch_tasks.finish_task`),
sends its outcome the same way, and only then records ``(run_id, slot, attempt)`` in a Faust
table; a later copy of a recorded task is not handled again.

Guarantees and limits (at-least-once, like every Faust agent):

* A task is acknowledged (its offset may be committed) only after its reports were
  acknowledged, so no task is lost.
* Redelivered copies (a rebalance, a restart after the table's changelog caught up) are
  answered from the table without calling the handler. A crash between the reports'
  acknowledgement and the table's changelog write can still call the handler twice for one
  attempt; the processor accepts one report per (run, slot), so the run sees one result,
  but a handler with external effects must be idempotent per ``(run_id, slot)``.
* The handler runs in a thread of the event loop's executor, so a slow handler does not
  stop the agent's heartbeats.
"""

from __future__ import annotations

import asyncio
import functools
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import faust

from consumers.branch_tasks import Handler, Report, finish_task, take_task
from consumers.faust_bridge.app import records
from schemas.commands import ReportBranchStarted
from schemas.events import BranchLaunched, BranchRelaunched
from schemas.topics import BRANCH_RESULTS, TASKS
from streams.clock import wall_clock_ms
from streams.settings import Settings


@dataclass
class SlotAgent:
    """What :func:`serve_slot` registered, and what it has done in this process."""

    agent: Any
    reported: Any
    handled: int = 0
    redeliveries: int = 0


def serve_slot(
    app: faust.App,
    settings: Settings,
    handler: Handler,
    *,
    slots: Sequence[str] | None = None,
    deadline_slots: Sequence[str] | None = None,
    clock_uncertainty_ms: int = 0,
    clock: Callable[[], int] = wall_clock_ms,
    name: str | None = None,
    table: str = "reported-tasks",
) -> SlotAgent:
    """Register an agent on ``app`` serving ``slots`` (all if ``None``) with ``handler``.

    ``deadline_slots`` are the slots whose deadline is checked when taken (default: every
    slot but one kept for the record, as :class:`~consumers.branch_worker.BranchWorker`).
    ``clock_uncertainty_ms`` is a floor: the run's own allowance applies when larger.
    The table ``table`` (``<app id>-<table>-changelog``) remembers answered attempts.
    """
    tasks = records(app, settings, TASKS)
    results = records(app, settings, BRANCH_RESULTS)
    served = set(slots) if slots else None
    checked = set(deadline_slots) if deadline_slots is not None else None
    worker = name or f"faust-{socket.gethostname()}"
    reported = app.Table(table, default=int, partitions=tasks.partitions)
    state = SlotAgent(agent=None, reported=reported)

    async def send(report: Report) -> None:
        # Acknowledged before the next step: Started before the handler runs, the outcome
        # before the attempt is recorded as answered.
        sent = await results.send(key=report.admission_key.encode(), value=report)
        await sent

    async def serve(stream: faust.StreamT[Any]) -> None:
        loop = asyncio.get_running_loop()
        async for record in stream:
            if not isinstance(record, BranchLaunched | BranchRelaunched):
                continue
            if served is not None and record.slot not in served:
                continue
            attempt = f"{record.run_id}/{record.slot}/{record.attempt}"
            if reported[attempt]:
                state.redeliveries += 1
                continue
            task, first = take_task(
                record,
                worker=worker,
                now_ms=clock(),
                clock_uncertainty_ms=clock_uncertainty_ms,
                deadline_slots=checked,
            )
            await send(first)
            if isinstance(first, ReportBranchStarted):
                job = functools.partial(finish_task, task, handler, worker=worker, clock=clock)
                await send(await loop.run_in_executor(None, job))
            reported[attempt] = 1
            state.handled += 1

    state.agent = app.agent(tasks, name=f"{app.conf.id}.slot")(serve)
    return state
