"""Where the admission app sends each of the core's events (streams.apps.admission.route)."""

from __future__ import annotations

import typing
from pathlib import Path

import pytest

from schemas.codec import decode
from schemas.events import CandidateProposed, DispatchRequested, DispatchWithdrawn
from streams.adapters.workflow_table import WorkflowTable
from streams.apps.admission import AdmissionApp, topic_of
from streams.core.admission import AdmissionEvent
from streams.engine.app import Route
from tests.support.kafka import unique_settings

FIXTURES = Path(__file__).resolve().parents[2] / "schemas" / "fixtures"
EVENTS = typing.get_args(AdmissionEvent)


def newest_fixture(cls: type) -> object:
    """The event as its newest released version's fixture holds it."""
    versions = sorted(FIXTURES.joinpath(cls.__name__).glob("v*.bin"), key=lambda p: int(p.stem[1:]))
    event = decode(versions[-1].read_bytes())
    assert type(event) is cls
    return event


@pytest.mark.parametrize("cls", EVENTS, ids=lambda c: c.__name__)
def test_each_event_goes_to_its_topic_by_its_key(cls: type) -> None:
    settings = unique_settings()
    # route() reads no workflow: the table stays unopened (it would connect to Kafka).
    app = AdmissionApp(settings, typing.cast(WorkflowTable, None))
    event = newest_fixture(cls)
    by_scope = isinstance(event, CandidateProposed | DispatchRequested | DispatchWithdrawn)
    key = event.scope_key if by_scope else event.admission_key  # type: ignore[attr-defined]
    assert app.route(event) == Route(settings.topic(topic_of(event)), key)  # type: ignore[arg-type]
    assert topic_of(event).name == (  # type: ignore[arg-type]
        "candidates"
        if by_scope
        else "tasks"
        if cls.__name__ in ("BranchLaunched", "BranchRelaunched")
        else "runs"
    )
