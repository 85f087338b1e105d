"""Properties of the journal under arbitrary interleavings (Hypothesis).

A run is driven through random steps: performing committed effects with random faults
(answer lost, answered unknown, request lost with or without an answer), delivering answers
in either order, letting time pass (timers fire), crashing (the uncommitted tail is cut at a
random point, what was not performed is lost, a new owner restores by folding the journal and
maybe recovers), restores from a backup (the journal cut anywhere, even before records whose
effects happened, recovered with ``journal_origin="backup"``) and operator recoveries. Then,
optionally, the venue is unreachable for three minutes of timers; then it becomes reliable
and the run is driven to rest.

Invariants:

* the venue never accepts two orders under one client order id; every send the shell makes
  finds no earlier order of that action at the venue (asserted at each send);
* in the journal, attempt n+1 of an action follows a proven absence of attempt n;
* a due timer always has something to do (no spinning);
* the state survives the changelog codec unchanged after every step;
* the state is the fold of the journal, and every action ends settled or held, with exactly
  one venue order when it ended acknowledged or filled and none when it expired or was
  rejected.
"""

from __future__ import annotations

from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from schemas.events import AttemptStarted, HoldResolved, ReceiptRecorded
from streams.core.journal import ActionStatus, EffectRequest
from streams.core.journal.lifecycle import SETTLED
from streams.core.journal.state_codec import decode_state, encode_state
from tests.support.journal import MINUTE, SECOND, T0, Venue, World, dispatch, fold, recover_run

FAULTS = ("ok", "ok", "lost", "unknown", "unreached", "silent")
BEHAVIOUR = ("fill", "fill", "rest", "reject")

steps = st.lists(
    st.one_of(
        st.tuples(st.just("perform"), st.lists(st.sampled_from(FAULTS), min_size=1, max_size=5)),
        st.tuples(st.just("deliver"), st.booleans()),
        st.tuples(st.just("wait"), st.integers(0, 40 * SECOND)),
        st.tuples(st.just("crash"), st.integers(0, 100), st.booleans()),
        st.tuples(st.just("backup"), st.integers(0, 100)),
        st.tuples(st.just("recover"), st.booleans()),
    ),
    max_size=50,
)


def _cycle(faults: list[str]) -> Any:
    position = iter(range(10**9))

    def fault(_: EffectRequest) -> str:
        return faults[next(position) % len(faults)]

    return fault


def check_attempt_order(world: World) -> None:
    absent: set[tuple[str, int]] = set()
    latest: dict[str, int] = {}
    for record in world.history:
        if isinstance(record, ReceiptRecorded) and record.outcome == "absent":
            absent.add((record.action_id, record.attempt))
        if isinstance(record, HoldResolved) and record.resolution == "confirm_absent":
            absent.add((record.action_id, latest.get(record.action_id, 0)))
        if isinstance(record, AttemptStarted):
            latest[record.action_id] = record.attempt
        if isinstance(record, AttemptStarted) and record.attempt > 1:
            assert (record.action_id, record.attempt - 1) in absent, (
                f"attempt {record.attempt} of {record.action_id} before attempt "
                f"{record.attempt - 1} was proven absent"
            )


@settings(max_examples=300, deadline=None)
@given(
    plan=steps,
    delay=st.integers(0, 25 * SECOND),
    behaviour=st.fixed_dictionaries(
        {slot: st.sampled_from(BEHAVIOUR) for slot in ("entry", "protection", "notification")}
    ),
    window=st.integers(1 * SECOND, 15 * MINUTE),
    limit=st.booleans(),
    outage=st.booleans(),
)
def test_no_double_send_and_every_action_settles_or_holds(
    *,
    plan: list[tuple[Any, ...]],
    delay: int,
    behaviour: dict[str, str],
    window: int,
    limit: bool,
    outage: bool,
) -> None:
    world = World(Venue(visibility_delay_ms=delay, behaviour=behaviour))
    world.decide(dispatch(expires_at_ms=T0 + window, limit_price="97000" if limit else None))
    for step in plan:
        kind = step[0]
        if kind == "perform":
            world.fault = _cycle(step[1])
            world.perform()
        elif kind == "deliver":
            if step[1]:
                world.answers.reverse()
            world.deliver()
        elif kind == "wait":
            world.now += step[1]
            world.timers()
        elif kind == "crash":
            tail = len(world.history) - world.effect_floor
            world.crash(world.effect_floor + tail * step[1] // 100, recover=step[2])
        elif kind == "backup":
            world.crash(len(world.history) * step[1] // 100, origin="backup")
        else:
            origin = "backup" if step[1] else "live"
            world.decide(recover_run(world.now, origin=origin, request=f"op-{world.now}"))
        check_attempt_order(world)
        assert max(world.venue.accepted.values(), default=0) <= 1
        if world.state is not None:  # what the changelog would restore
            assert decode_state(encode_state(world.state)) == world.state

    if outage:
        world.fault = lambda _: "silent"
        for _ in range(36):
            world.step(5 * SECOND)
    world.settle()
    check_attempt_order(world)
    assert world.state == fold(world.history)
    assert world.state is not None
    for action in world.state.actions:
        assert action.status in SETTLED or action.status is ActionStatus.HELD, action
        if action.intent is None:
            continue
        orders = world.venue.accepted[action.intent.client_order_id]
        if action.status in (ActionStatus.ACKNOWLEDGED, ActionStatus.FILLED):
            assert orders == 1, (action.action_id, action.status)
        elif action.status in (ActionStatus.EXPIRED, ActionStatus.REJECTED):
            assert orders == 0, (action.action_id, action.status)
    event(f"crashes: {min(world.crashes, 3)}")
    statuses = {a.status.value for a in world.state.actions}
    for status in sorted(statuses & {"held", "expired", "rejected", "not_needed"}):
        event(f"an action ended {status}")
    if any(e.attempt > 1 for e in world.history if isinstance(e, AttemptStarted)):
        event("re-attempted after proven absence")
    if any(isinstance(e, ReceiptRecorded) and e.source == "reconciliation" for e in world.history):
        event("reconciled by lookup")
