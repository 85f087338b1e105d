"""The projector starting on topics whose partition leaders are still being elected.

A topic created a moment before answers ListOffsets with ``NOT_LEADER_FOR_PARTITION`` or
``LEADER_NOT_AVAILABLE`` for a short while (seen on this broker: the projector stopped with
``ProjectionError: cannot read offsets ... Not leader for partition`` on topics created by
the line before). Those answers are injected here into the real admin client's futures, as
librdkafka delivers them; the projector waits them out and projects everything.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import KafkaError

from projections import sources
from projections.errors import ProjectionError
from projections.projector import Projector
from streams.kafka.clients import admin_client
from streams.settings import Settings
from tests.support.faults import Faulty, kafka_error
from tests.support.history import build_history, fresh_topics, produce_history

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture
def settings() -> Iterator[Settings]:
    with fresh_topics(partitions=6) as s:
        yield s


def leaderless(code: int) -> Callable[..., dict[Any, Future[Any]]]:
    """A ``list_offsets`` whose first partition's answer is ``code``, the rest real."""

    def call(real: Callable[..., dict[Any, Future[Any]]], *args: Any, **kwargs: Any) -> Any:
        futures = dict(real(*args, **kwargs))
        first = next(iter(futures))
        failed: Future[Any] = Future()
        failed.set_exception(kafka_error(code, "injected: no leader yet"))
        futures[first] = failed
        return futures

    return call


def test_offsets_asked_before_the_leaders_are_known_are_waited_for(settings: Settings) -> None:
    rng = random.Random(7)
    history = build_history(rng, occurrences=4)
    produce_history(settings, history, rng=rng)
    with Projector(settings) as projector:
        admin = Faulty(admin_client(settings))
        admin.plan(
            "list_offsets",
            leaderless(KafkaError.NOT_LEADER_FOR_PARTITION),
            leaderless(KafkaError.LEADER_NOT_AVAILABLE),
            leaderless(KafkaError.NOT_LEADER_FOR_PARTITION),
        )
        projector._sources._admin_client = admin  # type: ignore[assignment]
        projector.run_until(timeout_s=60)
        projected = projector.stats.messages
    assert admin.calls["list_offsets"] >= 4  # three refused, then answered
    assert projected == len(history)


def test_a_leader_that_never_comes_is_an_error_not_a_hang(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sources, "LEADERS_WAIT_S", 0.5)
    with Projector(settings) as projector:
        admin = Faulty(admin_client(settings))
        admin.around("list_offsets", leaderless(KafkaError.LEADER_NOT_AVAILABLE))
        projector._sources._admin_client = admin  # type: ignore[assignment]
        with pytest.raises(ProjectionError, match="injected: no leader yet for 1 partitions"):
            projector.run_until(timeout_s=30)
    assert 2 <= admin.calls["list_offsets"] <= 10
