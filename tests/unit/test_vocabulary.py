"""One name per thing: the webhook's ``?wait=`` answer says what the read model says."""

from __future__ import annotations

from consumers.ingest.outcomes import outcome_of
from projections.handlers import Source, project
from schemas.events import DeliveryDeduplicated, DeliveryRejected, OccurrenceConflict
from streams.core.admission import Admit
from tests.support.core import MINUTE, T0, Processor, candle, delivery, workflow

WORKFLOW = workflow()
ADMITTED = Processor().handle(
    Admit(delivery(WORKFLOW, candle(), "d-1", T0 + MINUTE), WORKFLOW), T0 + MINUTE
)[0]
OUTCOMES = (
    ADMITTED,
    DeliveryDeduplicated("d-2", "k", "run-1", "in_flight", 4, 5),
    OccurrenceConflict("d-3", "k", "run-1", "c", "x", ("price",), 4, 5),
    DeliveryRejected("d-4", "k", "s", "paper", "beyond_horizon", "old", 4, 5),
)


def test_the_wait_answer_and_the_projection_name_each_outcome_alike() -> None:
    for event in OUTCOMES:
        found = outcome_of(event)
        assert found is not None
        rows = [
            row
            for table, row in project(Source("runs", 0, 0), event)
            if table == "delivery_outcomes"
        ]
        assert [found[1].outcome] == [row["outcome"] for row in rows], type(event).__name__
    deduplicated = outcome_of(OUTCOMES[1])
    assert deduplicated is not None and deduplicated[1].as_json()["outcome"] == "deduplicated"
