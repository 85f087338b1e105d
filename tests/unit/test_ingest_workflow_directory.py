"""The workflow directory shuts down cleanly while a catch-up is still running.

Stopping ingest cancels the background refresh while its catch-up is in flight. The future
that requests share must not be cancelled with it: completing a cancelled future raised
``InvalidStateError`` in the refresh task, and the loop logged that traceback on the way out.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, cast

from consumers.ingest.workflows import WorkflowDirectory
from schemas.events import WorkflowRevised
from streams.adapters.workflow_table import WorkflowTable


class _SlowTable:
    """Stands in for the table: ``catch_up`` blocks until the test lets it finish."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def catch_up(self, timeout_s: float = 10.0) -> None:
        self.started.set()
        self.release.wait(timeout_s)

    def all(self) -> list[WorkflowRevised]:
        return []

    def close(self) -> None:
        self.release.set()


def test_closing_during_a_catch_up_logs_no_error() -> None:
    errors: list[dict[str, Any]] = []

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _loop, context: errors.append(context))
        table = _SlowTable()
        directory = WorkflowDirectory(cast(WorkflowTable, table), refresh_interval_s=60)
        directory.start()
        await loop.run_in_executor(None, table.started.wait, 5)
        closing = loop.create_task(directory.close())
        await asyncio.sleep(0.05)  # the background refresh is cancelled mid catch-up
        table.release.set()
        await closing
        for _ in range(5):  # let the refresh task finish and be collected
            await asyncio.sleep(0)

    asyncio.run(scenario())
    assert errors == []
