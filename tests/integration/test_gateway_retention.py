"""A finished run's journal leaves the gateway's state, and a repeat of its dispatch sends nothing.

On the real broker, with a real paper venue process and the gateway on the exactly-once
engine in this process, reading a clock the test moves. A run is dispatched and its entry
fills, its protection rests, its notification is posted. Then the clock moves past the
deadline plus the default retention (7 days): the run's journal state must be gone, with a
``JournalEvicted`` record on ``journal`` and a tombstone for the run's key on
``gateway-changelog``. The gate's dispatch is then produced again (what a gateway that lost
its offsets and state positions, or a journal restored from a backup, would read): it must be
refused, with the venue still holding one order per action, also after a restart. A dispatch
first read long after its deadline is refused the same way. The read side keeps the run's
rows, its timeline shows both records, and ``recover --run`` says there is nothing to recover.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest

from consumers.gateway.app import make_app
from consumers.gateway.settings import GatewaySettings
from projections.projector import Projector
from schemas.events import RunCheckpointed
from schemas.topics import GATEWAY_CHANGELOG
from sluicegate.cli import main
from streams.clock import wall_clock_ms
from streams.engine.failpoints import Failpoints
from streams.engine.processor import Processor
from streams.engine.store import state_key
from streams.kafka.topics import ensure_topics
from streams.settings import Settings
from tests.support import gateway as g
from tests.support.engine_toy import Running
from tests.support.history import cleanup
from tests.support.kafka import read_topic, unique_settings, wait_until
from tests.support.venue import VenueProcess, running_venue

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

DAY_MS = 86_400_000


@dataclass
class World:
    settings: Settings
    venue: VenueProcess
    gateway_settings: GatewaySettings
    ahead_ms: list[int] = field(default_factory=lambda: [0])
    running: Running | None = None

    def clock(self) -> int:
        return wall_clock_ms() + self.ahead_ms[0]

    def start(self) -> None:
        app = make_app(
            self.settings,
            self.gateway_settings,
            instance_id="gateway-1",
            clock=self.clock,
            failpoints=Failpoints(),
        )
        processor: Processor[Any, Any, Any] = Processor(
            self.settings, app, instance_id="gateway-1", clock=self.clock, static_membership=True
        )
        self.running = Running(processor)

    def stop(self) -> None:
        if self.running is not None:
            self.running.stop()
            assert self.running.error is None, self.running.error
            self.running = None


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    settings = unique_settings(partitions=2)
    ensure_topics(settings)
    with running_venue(tmp_path, g.DRILL_VENUE) as venue:
        env = g.gateway_env(settings, venue)
        world = World(settings, venue, GatewaySettings.from_env(env))
        assert world.gateway_settings.retention_ms == 7 * DAY_MS  # the default
        world.start()
        try:
            yield world
        finally:
            world.stop()
            cleanup(settings)


def _named(records: list[Any], name: str, run_id: str) -> list[Any]:
    return [r for r in records if type(r).__name__ == name and r.run_id == run_id]


def _changelog_value(settings: Settings, run_id: str) -> tuple[bool, bytes | None]:
    """Whether the changelog has the run's key at all, and its latest value."""
    key, seen, value = state_key(run_id).encode(), False, None
    for message in read_topic(settings, settings.topic(GATEWAY_CHANGELOG)):
        if message.key() == key:
            seen, value = True, message.value()
    return seen, value


def _orders(world: World, run_id: str) -> dict[str, int]:
    counted = g.venue_orders(world.venue, [g.client_id(run_id, s) for s in ("entry", "protection")])
    posts = g.notifications(world.venue).get(g.client_id(run_id, "notification"), {})
    return {
        "entry": counted[g.client_id(run_id, "entry")],
        "protection": counted[g.client_id(run_id, "protection")],
        "notification": int(posts.get("posts", 0)),
    }


def test_a_finished_run_is_evicted_and_a_repeat_of_its_dispatch_sends_nothing(
    world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    dispatched = g.dispatch()
    run = dispatched.run_id
    producer = g.ActionsProducer(world.settings)
    producer.send([dispatched])

    def finished() -> bool:
        return any(
            isinstance(r, RunCheckpointed) and r.next_tasks == ()
            for r in g.journal(world.settings, run)
        )

    wait_until(finished, timeout_s=60, what="the run's last checkpoint")
    assert _orders(world, run) == {"entry": 1, "protection": 1, "notification": 1}
    assert _changelog_value(world.settings, run)[1] is not None

    # Seven days and a minute after the deadline (10 minutes after the source time).
    assert dispatched.expires_at_ms is not None
    world.ahead_ms[0] = dispatched.expires_at_ms + 7 * DAY_MS + 60_000 - wall_clock_ms()

    def evicted() -> bool:
        return bool(_named(g.journal(world.settings, run), "JournalEvicted", run))

    wait_until(evicted, timeout_s=60, what="the run's JournalEvicted")
    records = g.journal(world.settings, run)
    eviction = records[-1]
    assert type(eviction).__name__ == "JournalEvicted"
    horizon = dispatched.expires_at_ms - dispatched.clock_uncertainty_ms
    assert eviction.deadline_horizon_ms == horizon
    assert eviction.evicted_at_ms >= horizon + 7 * DAY_MS
    assert sorted(eviction.actions) == [
        f"{run}.entry=filled",
        f"{run}.notification=acknowledged",
        f"{run}.protection=acknowledged",
    ]
    seen, value = _changelog_value(world.settings, run)
    assert seen and value is None, "the run's key must end with a tombstone"

    # The same dispatch again: nothing is intended, attempted or sent; it is refused.
    producer.send([dispatched])
    wait_until(
        lambda: _named(g.journal(world.settings, run), "DispatchRefused", run),
        timeout_s=30,
        what="the repeated dispatch's DispatchRefused",
    )
    after = g.journal(world.settings, run)
    [refused] = _named(after, "DispatchRefused", run)
    assert (refused.reason, refused.action_id) == ("beyond_horizon", dispatched.action_id)
    assert len(_named(after, "ActionIntended", run)) == 3
    assert len(_named(after, "AttemptStarted", run)) == 3

    # A restart restores nothing for the run and recovers nothing; a dispatch first read a
    # week after its deadline (by the gateway's clock) is refused the same way.
    world.stop()
    world.start()
    late = g.dispatch()
    producer.send([late])
    wait_until(
        lambda: _named(g.journal(world.settings, late.run_id), "DispatchRefused", late.run_id),
        timeout_s=60,
        what="the late dispatch's DispatchRefused",
    )
    assert _named(g.journal(world.settings, run), "RecoveryStarted", run) == []
    assert len(_named(g.journal(world.settings, run), "DispatchRefused", run)) == 1
    assert _named(g.journal(world.settings, late.run_id), "ActionIntended", late.run_id) == []
    assert _orders(world, run) == {"entry": 1, "protection": 1, "notification": 1}
    assert _orders(world, late.run_id) == {"entry": 0, "protection": 0, "notification": 0}

    # The read side keeps the run's rows and shows why it left; a recovery has nothing to do.
    monkeypatch.setenv("SLUICEGATE_TOPIC_PREFIX", world.settings.topic_prefix)
    projector = Projector(world.settings)
    follow = threading.Thread(target=projector.run, daemon=True)
    follow.start()
    try:

        def timeline() -> dict[str, str]:
            code, out, _ = _cli(capsys, "runs", "timeline", run, "--json")
            rows = [orjson.loads(line) for line in out.splitlines()] if code == 0 else []
            return {row["type"]: row for row in rows}

        wait_until(lambda: "DispatchRefused" in timeline(), timeout_s=60, what="the timeline")
        code, out, _ = _cli(capsys, "runs", "timeline", run)
        assert code == 0
        [evicted_line] = [line for line in out.splitlines() if "JournalEvicted" in line]
        for settled in ("entry=filled", "protection=acknowledged", "notification=acknowledged"):
            assert settled in evicted_line
        [refused_line] = [line for line in out.splitlines() if "DispatchRefused" in line]
        assert refused_line.endswith("entry reason=beyond_horizon")

        def refusals() -> int:
            code, out, _ = _cli(capsys, "stats", "--json")
            return int(orjson.loads(out)["dispatches_refused"]) if code == 0 else -1

        # The repeat and the late dispatch, each once.
        wait_until(lambda: refusals() == 2, timeout_s=60, what="dispatches_refused == 2")
        code, _, err = _cli(capsys, "recover", "--run", run, "--wait", "2")
        assert code == 0, err
        assert "its journal left the gateway" in err
        assert _named(g.journal(world.settings, run), "RecoveryStarted", run) == []
    finally:
        projector.stop.set()
        follow.join(30)
        projector.close()


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err
