"""An example Faust app beside ``sluicegate serve``: a branch worker and an outcome counter.

Run it (after ``make up`` and ``sluicegate serve`` or ``make run``)::

    pip install -e '.[faust]'
    SLUICEGATE_TOPIC_PREFIX=demo. python -m examples.faust_app.worker worker -l info

It serves the ``journal`` slot of the example workflow (its handler writes the signal it saw
into the branch result) and counts admission outcomes by kind and reason in a Faust table
(``outcome-counts``), printing the table every 10 seconds.
"""

from __future__ import annotations

import logging
from typing import Any

import faust

from consumers.branch_worker import Task
from consumers.faust_bridge import records, serve_slot, sluicegate_app
from schemas.events import DeliveryDeduplicated, DeliveryRejected, OccurrenceConflict, RunAdmitted
from schemas.topics import RUNS
from streams.settings import load_settings

OUTCOMES = (RunAdmitted, DeliveryDeduplicated, DeliveryRejected, OccurrenceConflict)

log = logging.getLogger("sluicegate.faust-example")

settings = load_settings()
app = sluicegate_app(settings, "faust-example")


def journal(task: Task) -> dict[str, object]:
    """The ``journal`` slot: record what was signalled, and how much time was left."""
    return {
        "instrument": task.payload.get("instrument"),
        "side": task.payload.get("side"),
        "attempt": task.attempt,
    }


worker = serve_slot(app, settings, journal, slots=["journal"], name="faust-example")

outcome_counts = app.Table("outcome-counts", default=int)


@app.agent(records(app, settings, RUNS))
async def count_outcomes(stream: faust.StreamT[Any]) -> None:
    async for record in stream:
        kind = type(record).__name__
        if kind in {
            "RunAdmitted",
            "DeliveryDeduplicated",
            "DeliveryRejected",
            "OccurrenceConflict",
        }:
            outcome_counts[f"{kind}:{getattr(record, 'reason', '')}"] += 1


@app.timer(interval=10.0)  # type: ignore[untyped-decorator]
async def show_counts() -> None:
    log.info("outcomes so far: %s", dict(outcome_counts.items()))


if __name__ == "__main__":
    app.main()
