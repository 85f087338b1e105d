"""A finished run's journal is evicted after its retention, and a repeat of it sends nothing.

Runs are driven with random venue faults, answer orders, outages and waits until they rest
(the same harness as ``test_journal_properties.py``). Then, for a random retention:

* a run with an action not settled (held, or still unresolved) is never evicted, and has no
  eviction timer;
* a settled run's eviction is due at ``max(deadline - clock uncertainty, last record) +
  retention`` (a retention under 2 h counts as 2 h): not a millisecond before, and then
  ``CheckTimers`` writes exactly one ``JournalEvicted``, after which the state is gone;
* the run's dispatch read again at any time after that, on a clock up to ``retention - 1 h``
  behind, is refused (``DispatchRefused``) and nothing is intended, attempted or sent, also
  when the approval validity was lengthened or turned off in between;
* a dispatch of an unknown run read less than an hour after its send horizon is journalled
  (and expires unsent); from the hour on it is refused.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from schemas.events import (
    ActionExpired,
    ActionIntended,
    AttemptStarted,
    DispatchRefused,
    JournalEvicted,
)
from streams.core.errors import InconsistentHistory
from streams.core.journal import CheckTimers, Owner, decide, evolve, next_due_ms
from streams.core.journal.lifecycle import SETTLED
from streams.core.journal.retention import (
    BEYOND_HORIZON,
    MIN_RETENTION_MS,
    REFUSAL_AFTER_MS,
    send_horizon_ms,
)
from tests.support.journal import (
    MINUTE,
    RUN,
    SECOND,
    T0,
    UNCERTAINTY,
    Venue,
    World,
    dispatch,
)

OWNER = Owner("gateway-2", 7)
DAY = 24 * 60 * MINUTE
FAULTS = ("ok", "ok", "lost", "unknown", "unreached", "silent")
BEHAVIOUR = ("fill", "fill", "rest", "reject")


def _fault(faults: list[str]) -> Any:
    position = iter(range(10**9))
    return lambda _: faults[next(position) % len(faults)]


@settings(max_examples=200, deadline=None)
@given(
    faults=st.lists(st.sampled_from(FAULTS), min_size=1, max_size=6),
    waits=st.lists(st.integers(0, 40 * SECOND), max_size=8),
    behaviour=st.fixed_dictionaries(
        {slot: st.sampled_from(BEHAVIOUR) for slot in ("entry", "protection", "notification")}
    ),
    window=st.integers(1 * SECOND, 15 * MINUTE),
    approval=st.none() | st.integers(0, 20 * MINUTE),
    retention=st.integers(1 * SECOND, 30 * DAY),
    later=st.integers(0, 400 * DAY),
    skew=st.integers(0, 100),
    outage=st.booleans(),
    approval_again=st.sampled_from(("same", "off", "longer")),
)
def test_only_finished_runs_are_evicted_and_never_journalled_again(
    *,
    faults: list[str],
    waits: list[int],
    behaviour: dict[str, str],
    window: int,
    approval: int | None,
    retention: int,
    later: int,
    skew: int,
    outage: bool,
    approval_again: str,
) -> None:
    world = World(Venue(behaviour=behaviour))
    authorized = None if approval is None else T0 + approval
    world.decide(dispatch(expires_at_ms=T0 + window, authorized_until_ms=authorized))
    world.fault = _fault(faults)
    for wait in waits:
        world.step(wait)
    if outage:  # three minutes of a venue that never answers: held past the budget
        world.fault = lambda _: "silent"
        for _ in range(36):
            world.step(5 * SECOND)
    world.settle()
    state = world.state
    assert state is not None
    orders_before = dict(world.venue.accepted)

    due = next_due_ms(state, retention)
    if not all(a.status in SETTLED for a in state.actions):
        event("not finished: kept")
        assert due is None
        for at in (world.now, world.now + later + 400 * DAY):
            assert decide(state, CheckTimers(retention), at, OWNER) == []
        return

    kept = max(retention, MIN_RETENTION_MS)
    deadline = T0 + window - UNCERTAINTY
    assert due == max(deadline, state.updated_at_ms) + kept
    assert decide(state, CheckTimers(retention), due - 1, OWNER) == []
    [evicted] = decide(state, CheckTimers(retention), due, OWNER)
    assert isinstance(evicted, JournalEvicted)
    assert (evicted.evicted_at_ms, evicted.deadline_horizon_ms) == (due, deadline)
    assert evicted.retention_ms == kept
    assert sorted(evicted.actions) == sorted(f"{a.action_id}={a.status}" for a in state.actions)
    assert evolve(state, evicted) is None
    event(f"evicted with {len(state.actions)} action(s)")

    # The dispatch again, from this gateway or another whose clock is behind (by less than
    # the retention less an hour), at any time after; its approval limit comes from the
    # setting when it is read, which may have been lengthened or turned off since.
    reread = {
        "same": authorized,
        "off": None,
        "longer": None if authorized is None else authorized + 30 * DAY,
    }[approval_again]
    again = dispatch(expires_at_ms=T0 + window, authorized_until_ms=reread)
    behind = (kept - REFUSAL_AFTER_MS - 1) * skew // 100
    [refused] = decide(None, again, due + later - behind, OWNER)
    assert isinstance(refused, DispatchRefused)
    horizon = send_horizon_ms(T0 + window, reread, UNCERTAINTY)
    assert (refused.reason, refused.send_horizon_ms) == (BEYOND_HORIZON, horizon)
    assert evolve(None, refused) is None
    assert dict(world.venue.accepted) == orders_before


def test_a_held_action_keeps_its_run() -> None:
    world = World(Venue())
    world.decide(dispatch(instrument=""))  # unusable: held as invalid_dispatch, never sent
    world.settle()
    state = world.state
    assert state is not None and state.primary is not None
    assert state.primary.status.value == "held"
    assert next_due_ms(state, MIN_RETENTION_MS) is None
    assert decide(state, CheckTimers(MIN_RETENTION_MS), T0 + 1_000 * DAY, OWNER) == []


def test_a_dispatch_is_refused_from_an_hour_after_its_send_horizon_on() -> None:
    late = dispatch()
    horizon = late.expires_at_ms - UNCERTAINTY
    world = World(Venue(), now=horizon + REFUSAL_AFTER_MS - 1)
    journalled = world.decide(late)  # with the steps due at once after it
    assert isinstance(journalled[0], ActionIntended)
    assert [type(e) for e in journalled if isinstance(e, ActionExpired)] == [ActionExpired]
    # The entry is never attempted (its notification says it expired, as for any late read).
    assert [e.slot for e in journalled if isinstance(e, AttemptStarted)] == ["notification"]
    [refused] = decide(None, late, horizon + REFUSAL_AFTER_MS, OWNER)
    assert isinstance(refused, DispatchRefused) and refused.run_id == RUN
    # The approval's own limit counts when it ends first.
    approved = dispatch(authorized_until_ms=T0 + MINUTE)
    [by_approval] = decide(None, approved, T0 + MINUTE - UNCERTAINTY + REFUSAL_AFTER_MS, OWNER)
    assert isinstance(by_approval, DispatchRefused)


def test_a_restored_journal_looks_an_old_dispatch_up_instead_of_refusing_it() -> None:
    # A backup may predate an attempt of the run: what the venue has decides, not the age.
    old = dispatch(journal_origin="backup")
    world = World(Venue(), now=old.expires_at_ms + 30 * DAY)
    journalled = world.decide(old)
    assert isinstance(journalled[0], ActionIntended)
    assert any(type(e).__name__ == "RecoveryStarted" for e in journalled)
    assert not any(isinstance(e, DispatchRefused) for e in journalled)
    world.settle()
    assert all(s.slot != "entry" for s in world.sends)


def test_a_known_run_ignores_a_repeat_of_its_dispatch_whatever_the_time() -> None:
    world = World(Venue())
    world.decide(dispatch())
    world.settle()
    assert decide(world.state, dispatch(), T0 + 1_000 * DAY, OWNER) == []


def test_an_eviction_of_a_run_without_a_journal_is_refused() -> None:
    stray = JournalEvicted(RUN, (), T0, T0, MIN_RETENTION_MS, T0 + MIN_RETENTION_MS)
    with pytest.raises(InconsistentHistory):
        evolve(None, stray)
