"""An input topic deleted and created again is read from its start, however far it has grown.

A topic created again keeps its name and starts its offsets over. Kafka deletes the group's
offsets of the deleted topic, but the position the state recorded (``m/offsets``) stays in the
changelog. Before, when the new topic had grown past that position by the time the instance
looked, consumption resumed there: the new topic's records below it were never decided and
nothing said so. Now every store records the topic ids its positions were read in, a
position read in another topic is not resumed at, and the move is a dead letter.

Both ways an instance meets it: taking the partitions after the topic came back (a restart),
and holding them while it happens (its batch is aborted and it starts over).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence

import pytest

from streams.engine.processor import Processor
from streams.settings import Settings
from tests.integration.test_engine_poison import dead_letters
from tests.support.engine_toy import (
    Running,
    ToyApp,
    ToyProcessor,
    admitted,
    create_toy_topics,
    produce_records,
    record,
)
from tests.support.kafka import recreate_topic, unique_settings, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

_OLD = {f"r{n}" for n in range(5)}
_NEW = {f"r{n}" for n in range(5, 12)}  # offsets 0 to 6 of the new topic: past position 5


@pytest.fixture
def settings() -> Iterator[Settings]:
    s = unique_settings(partitions=1)
    create_toy_topics(s, partitions=1)
    yield s


def _records(names: set[str]) -> list[tuple[str, bytes]]:
    return [record("k", name) for name in sorted(names, key=lambda n: int(n[1:]))]


def _processor(settings: Settings) -> ToyProcessor:
    return Processor(settings, ToyApp(settings), instance_id="recreated", batch_size=100)


def _decided_once(settings: Settings, wanted: set[str]) -> bool:
    return set(admitted(settings)) >= wanted


def _assert_every_record_decided_once_and_the_move_recorded(settings: Settings) -> None:
    decided = admitted(settings)
    assert set(decided) == _OLD | _NEW
    assert set(decided.values()) == {1}
    (letter,) = dead_letters(settings)
    value, headers = letter
    assert value == b""
    assert headers["sluicegate.origin"] == f"{settings.topic_named('in')}[0]@5".encode()
    assert headers["sluicegate.kind"] == b"moved"
    reason = headers["sluicegate.reason"].decode()
    assert reason.startswith("the topic was deleted and created again after this state's")
    assert "position 5 was in the topic before; the new one is read from its start, offset 0" in (
        reason
    )


def test_a_topic_created_again_while_the_instance_was_away_is_read_from_its_start(
    settings: Settings,
) -> None:
    running = Running(_processor(settings))
    try:
        produce_records(settings, _records(_OLD))
        wait_until(lambda: _decided_once(settings, _OLD), timeout_s=60, what="the old records")
    finally:
        running.stop()

    recreate_topic(settings, "in", partitions=1)
    produce_records(settings, _records(_NEW))
    running = Running(_processor(settings))
    try:
        wait_until(lambda: _decided_once(settings, _NEW), timeout_s=60, what="the new records")
    finally:
        running.stop()

    assert running.error is None
    _assert_every_record_decided_once_and_the_move_recorded(settings)
    assert running.processor.stats.records == len(_NEW)


class _Pausable(ToyApp):
    """The toy app whose loop can be held between two batches, the consumer still assigned
    (its fetcher runs on): the instance looks again only after the topic has grown."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.go = threading.Event()
        self.go.set()
        self.held = threading.Event()

    def prepare(self, records: Sequence[object], now_ms: int) -> None:
        if not self.go.is_set():
            self.held.set()
            self.go.wait(120)


def test_a_topic_created_again_while_the_instance_holds_it_is_read_from_its_start(
    settings: Settings,
) -> None:
    app = _Pausable(settings)
    processor: ToyProcessor = Processor(settings, app, instance_id="recreated", batch_size=100)
    running = Running(processor)
    try:
        produce_records(settings, _records(_OLD))
        wait_until(lambda: _decided_once(settings, _OLD), timeout_s=60, what="the old records")
        app.go.clear()
        wait_until(app.held.is_set, timeout_s=30, what="the loop held")
        recreate_topic(settings, "in", partitions=1)
        produce_records(settings, _records(_NEW))
        app.go.set()
        wait_until(lambda: _decided_once(settings, _NEW), timeout_s=120, what="the new records")
    finally:
        app.go.set()
        running.stop()

    assert running.error is None
    _assert_every_record_decided_once_and_the_move_recorded(settings)
