"""The gateway's gauges on a real projection: an attempt held unresolved still counts.

The journal history is made by the real journal core (``tests/support/journal.py``): an entry
whose send answered "execution status unknown" and whose every lookup failed, held when its
reconciliation budget ran out, then resolved by the venue's later evidence (filled). Its
records are produced onto ``journal`` and projected into PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest

from projections import queries
from projections.projector import Projector
from schemas.codec import encode
from schemas.commands import LookupAnswered
from schemas.events import ActionHeld
from schemas.topics import JOURNAL
from streams.core.journal import JournalEvent, SendRequest
from streams.kafka.clients import idempotent_producer
from streams.settings import Settings
from tests.support.history import fresh_topics
from tests.support.journal import E_CLIENT, ENTRY_ID, RUN, SECOND, World, dispatch

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture
def settings() -> Iterator[Settings]:
    with fresh_topics(partitions=1) as s:
        yield s


def _project(settings: Settings, events: Sequence[JournalEvent]) -> dict[str, int]:
    producer = idempotent_producer(settings, client_id="test-journal")
    for event in events:
        producer.produce(settings.topic(JOURNAL), key=event.run_id.encode(), value=encode(event))
    assert producer.flush(30) == 0
    with Projector(settings) as projector:
        projector.run_until(timeout_s=60)
    with queries.reader(settings) as (conn, schema):
        stats = queries.get_stats(conn, schema)
    return {k: stats[k] for k in ("unresolved_attempt", "holds")}


def test_an_attempt_held_unresolved_counts_as_unresolved_until_it_is_resolved(
    settings: Settings,
) -> None:
    world = World()
    world.decide(dispatch(notification_json=None))
    world.fault = lambda e: "unknown" if isinstance(e, SendRequest) else "unreached"
    world.perform()
    for _ in range(40):
        world.step(5 * SECOND)
    [held] = world.of(ActionHeld)
    assert (held.reason, held.attempt) == ("reconciliation_budget_exhausted", 1)
    projected = len(world.history)
    assert _project(settings, world.history) == {"unresolved_attempt": 1, "holds": 1}

    late = LookupAnswered(
        RUN,
        ENTRY_ID,
        1,
        E_CLIENT,
        "filled",
        "O77",
        "FILLED",
        "0.5",
        "[]",
        None,
        world.now,
        world.now,
    )
    world.decide(late)
    assert world.status(ENTRY_ID) == "filled"
    assert _project(settings, world.history[projected:]) == {"unresolved_attempt": 0, "holds": 0}
