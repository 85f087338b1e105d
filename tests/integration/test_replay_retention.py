"""``replay`` says which offsets left retention while it read, instead of skipping them in silence.

``read_topics`` fixes each partition's start and end when it begins. Before, retention that
moved a start past the replay's position made the consumer jump to the new start by itself
(``auto.offset.reset=earliest``): the output lacked those records and nothing said so.
Retention is played by ``DeleteRecords`` on one partition of three, between the moment the
replay fixed its bounds (it announces its total then) and its first fetch; the command's
lines are checked with the same fault injected into its ``read_topics``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence

import pytest

from sluicegate.cli import main
from sluicegate.commands import replay as replay_command
from streams.adapters.replay import Gap, Replayed, read_topics
from streams.kafka.topics import ensure_topics
from streams.settings import Settings
from tests.support.history import build_history, cleanup, produce_history
from tests.support.kafka import expire_records, unique_settings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture
def settings() -> Iterator[Settings]:
    s = unique_settings(partitions=3)
    ensure_topics(s)
    rng = random.Random(11)
    produce_history(s, build_history(rng, 24, tag="replay"), rng=rng)
    try:
        yield s
    finally:
        cleanup(s)


Read = list[tuple[int, int]]
"""(partition, offset) of each record of ``runs`` a replay yielded, in the order it did."""


def _replay(
    settings: Settings, partition: int = 0, before_reading: int | None = None
) -> tuple[Read, list[Gap]]:
    """What a replay of ``runs`` yields and the gaps it reports; with ``before_reading``,
    ``partition``'s start is moved there once the bounds are fixed."""
    gaps: list[Gap] = []

    def fixed(_: int) -> None:
        if before_reading is not None:
            expire_records(settings, "runs", partition, before_reading)

    read = [
        (r.partition, r.offset)
        for r in read_topics(settings, ["runs"], on_total=fixed, on_gap=gaps.append)
    ]
    return read, gaps


def _of(read: Read, partition: int) -> list[int]:
    return [offset for p, offset in read if p == partition]


def test_offsets_removed_while_replaying_are_reported_and_the_rest_is_read(
    settings: Settings,
) -> None:
    everything, none = _replay(settings)
    assert none == [] and len(everything) == len(set(everything))
    busiest = max(range(3), key=lambda p: len(_of(everything, p)))
    offsets = _of(everything, busiest)
    assert len(offsets) > 20
    start, middle = offsets[0], offsets[len(offsets) // 2]

    read, gaps = _replay(settings, busiest, before_reading=middle)

    assert gaps == [Gap("runs", busiest, start, middle)]
    assert _of(read, busiest) == [o for o in offsets if o >= middle], "in order, none twice"
    for other in set(range(3)) - {busiest}:
        assert _of(read, other) == _of(everything, other), "the other partitions are whole"
    assert gaps[0].describe() == (
        f"runs[{busiest}]: offsets {start} to {middle - 1} left the topic's retention before "
        "replay read them; they are not in the output"
    )


def test_a_partition_emptied_while_replaying_ends_with_its_gap(settings: Settings) -> None:
    everything, _ = _replay(settings)
    offsets = _of(everything, 0)
    start, end = offsets[0], offsets[-1] + 1

    read, gaps = _replay(settings, 0, before_reading=end)

    assert _of(read, 0) == []
    assert gaps == [Gap("runs", 0, start, end)]
    assert sorted(read) == sorted(r for r in everything if r[0] != 0)


def test_the_command_names_the_gap_and_exits_0(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    everything, _ = _replay(settings)
    offsets = _of(everything, 0)
    start, middle = offsets[0], offsets[len(offsets) // 2]

    def retention_strikes(
        s: Settings,
        topics: Sequence[str],
        since_ms: int | None = None,
        on_total: Callable[[int], None] | None = None,
        on_message: Callable[[], None] | None = None,
        *,
        on_gap: Callable[[Gap], None] | None = None,
    ) -> Iterator[Replayed]:
        def total(n: int) -> None:
            expire_records(settings, "runs", 0, middle)
            if on_total is not None:
                on_total(n)

        return read_topics(s, topics, since_ms, total, on_message, on_gap=on_gap)

    monkeypatch.setattr(replay_command, "read_topics", retention_strikes)
    monkeypatch.setenv("SLUICEGATE_TOPIC_PREFIX", settings.topic_prefix)
    assert main(["replay", "--topic", "runs", "--no-progress"]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == len(everything) - len([o for o in offsets if o < middle])
    assert (
        f"replay: runs[0]: offsets {start} to {middle - 1} left the topic's retention before "
        "replay read them; they are not in the output"
    ) in err
    assert (
        f"replay: {middle - start} offset(s) of 1 partition(s) left retention while replay read "
        "them (see above): the output lacks whatever records they held"
    ) in err
