"""Crash drills of the execution gateway: kill -9 at every boundary, twice; zombies; backups.

One paper venue process serves every scenario (``tests/support/drills.py``); each scenario has
its own topics and gateway processes and runs concurrently with the others (the module starts
them all, each test waits for its own). The failpoints (``SLUICEGATE_FAILPOINTS``) make the
gateway SIGKILL (or SIGSTOP) itself at an exact commit boundary; "twice in a row" restarts it
with the same failpoint once more, then without. Afterwards the venue must hold exactly one
order per action (counted through its admin API; a notification through its sink), and every
action must end with a receipt or a hold. The drill's table is written to
``var/test-reports/gateway-drill.md``.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from consumers.gateway.operator import send_commands
from schemas.commands import RecoverRun, ResolveHold
from schemas.events import (
    ActionExpired,
    ActionHeld,
    AttemptStarted,
    HoldResolved,
    QueryRequested,
    ReceiptRecorded,
    RecoveryReceiptRecorded,
    RecoveryStarted,
    RunCheckpointed,
)
from streams.core.journal.state_codec import decode_state
from streams.engine.store import state_key
from tests.support import drills as d
from tests.support import gateway as g
from tests.support.venue import VenueProcess, running_venue

pytestmark = [pytest.mark.drill, pytest.mark.timeout(900)]

REPORT = Path("var/test-reports/gateway-drill.md")
E, P, N = "entry", "protection", "notification"

BOUNDARIES: dict[str, str] = {
    "E before the intent commits": "before_commit:ActionIntended[slot=entry]",
    "E after the intent, before dispatch-start": "after_commit:ActionIntended[slot=entry]",
    "E after dispatch-start, no send": "after_commit:AttemptStarted[slot=entry]",
    "E after dispatch-start, remote acceptance": "after_effect:SendRequest[slot=entry]",
    "E after the receipt, before the checkpoint advances": (
        "after_commit:ReceiptRecorded[slot=entry]"
    ),
    "E after the advance, before the next action": "after_commit:RunCheckpointed[checkpoint_id=C2]",
    "P after dispatch-start, no send": "after_commit:AttemptStarted[slot=protection]",
    "P after dispatch-start, remote acceptance": "after_effect:SendRequest[slot=protection]",
    "N after dispatch-start, no send": "after_commit:AttemptStarted[slot=notification]",
    "N after dispatch-start, remote acceptance": "after_effect:SendRequest[slot=notification]",
}
"""Where the first start dies."""

AGAIN: dict[str, str] = {
    "E after the intent, before dispatch-start": "before_commit:AttemptStarted[slot=entry]",
    "E after dispatch-start, remote acceptance": "after_effect:LookupRequest[slot=entry]",
    "E after the receipt, before the checkpoint advances": (
        "before_commit:RunCheckpointed[checkpoint_id=C2]"
    ),
    "E after the advance, before the next action": "before_commit:QueryRequested[slot=protection]",
    "P after dispatch-start, remote acceptance": "after_effect:LookupRequest[slot=protection]",
    "N after dispatch-start, remote acceptance": "after_effect:LookupRequest[slot=notification]",
}
"""Where the restart dies, inside the same window, when the first start's record does not
recur: before the dispatch-start that follows the intent, after the lookup that finds the
accepted order (its answer not recorded), before the advance that follows the receipt, before
the first step of the next action. The others recur on the restart (the dispatch is consumed
again; an attempt proven absent is attempted again) and die at the same failpoint."""


# -- scenarios ------------------------------------------------------------------------------


def boundary(name: str, failpoint: str) -> Callable[[VenueProcess, Path], d.Outcome]:
    def run(venue: VenueProcess, root: Path) -> d.Outcome:
        scenario = d.Scenario(name, venue, root)
        scenario.dispatch()
        scenario.run_twice_then_clean(failpoint, AGAIN.get(name, failpoint))
        return scenario.outcome()

    return run


def with_fault(
    name: str, fault: Callable[[str], dict[str, Any]], env: dict[str, str] | None = None
) -> Callable[[VenueProcess, Path], d.Outcome]:
    """A venue (or sink) fault armed for this run's action, no kill."""

    def run(venue: VenueProcess, root: Path) -> d.Outcome:
        scenario = d.Scenario(name, venue, root, env)
        record = g.dispatch()
        venue.fault(**fault(record.run_id))
        scenario.dispatch(record)
        gateway = scenario.gateway()
        gateway.start()
        scenario.wait(scenario.rests, gateway, d.RUN_TIMEOUT_S)
        return scenario.outcome()

    return run


def lapsed_during_downtime(
    name: str, env: dict[str, str], window_ms: int
) -> Callable[[VenueProcess, Path], d.Outcome]:
    """Killed after the intent; restarted once the deadline (or approval) has lapsed."""

    def run(venue: VenueProcess, root: Path) -> d.Outcome:
        scenario = d.Scenario(name, venue, root, env)
        scenario.dispatch(window_ms=window_ms)
        gateway = scenario.gateway()
        gateway.start(failpoints=BOUNDARIES["E after the intent, before dispatch-start"])
        assert gateway.wait_exit(60) == -9
        time.sleep(4.5)  # downtime: the deadline (or the approval) lapses meanwhile
        gateway.start()
        scenario.wait(scenario.rests, gateway, d.RUN_TIMEOUT_S)
        return scenario.outcome()

    return run


def article_fixture(venue: VenueProcess, root: Path) -> d.Outcome:
    """E1 filled as O77 while its answer is lost; killed; recovery links it; killed again
    after the receipt and before C18; the third start advances without sending E1."""
    scenario = d.Scenario("article fixture", venue, root)
    scenario.dispatch()
    gateway = scenario.gateway()
    gateway.start(failpoints=BOUNDARIES["E after dispatch-start, remote acceptance"])
    assert gateway.wait_exit(60) == -9
    gateway.start(failpoints=BOUNDARIES["E after the receipt, before the checkpoint advances"])
    assert gateway.wait_exit(60) == -9
    gateway.start()
    scenario.wait(scenario.rests, gateway, d.RUN_TIMEOUT_S)
    return scenario.outcome()


def zombie(venue: VenueProcess, root: Path) -> d.Outcome:
    """Gateway A stops (SIGSTOP) after AttemptStarted, right before its request leaves; B
    takes the partition over and settles the entry; A resumes and sends its stale request."""
    scenario = d.Scenario("SIGSTOP after dispatch-start, resumed after takeover", venue, root)
    a, b = scenario.gateway("gateway-a"), scenario.gateway("gateway-b")
    scenario.dispatch()
    a.start(failpoints="before_send:SendRequest[slot=entry]!stop")

    def takeover() -> None:
        b.start()

        def b_settled_the_entry() -> bool:
            records = scenario.journal()
            return any(
                isinstance(r, ReceiptRecorded) and r.slot == E and r.attempt == 2 for r in records
            )

        scenario.wait(b_settled_the_entry, b, 60)

    scenario.pause_resume(a, takeover)
    deadline = time.monotonic() + 30
    while "entry attempt 1: " not in a.log():
        assert time.monotonic() < deadline, "the resumed zombie never finished its send"
        time.sleep(0.2)
    scenario.wait(scenario.rests, None, d.RUN_TIMEOUT_S)
    outcome = scenario.outcome()
    outcome.notes.append(next(line for line in a.log().splitlines() if "entry attempt 1: " in line))
    return outcome


def quiet_period(venue: VenueProcess, root: Path) -> d.Outcome:
    """The venue accepts E, loses the answer and says "not found" for 20 s; quiet period 30 s."""
    env = {
        "SLUICEGATE_VENUE_QUIET_PERIOD": "30s",
        "SLUICEGATE_GATEWAY_LOOKUP_INTERVAL": "2s",
        "SLUICEGATE_GATEWAY_RECONCILIATION_BUDGET": "2m",
    }
    scenario = d.Scenario("not found for 20 s, quiet period 30 s", venue, root, env)
    record = g.dispatch()
    venue.fault(action="drop", client_order_id=g.client_id(record.run_id, E), quiet_ms=20_000)
    scenario.dispatch(record)
    gateway = scenario.gateway()
    gateway.start()
    scenario.wait(scenario.rests, gateway, 120)
    return scenario.outcome()


def backup_restore(venue: VenueProcess, root: Path) -> d.Outcome:
    """The changelog is restored from a backup taken before E's attempt; E, P and N had all
    been sent since. Started with --journal-restored, nothing is sent again."""
    scenario = d.Scenario("journal restored from before the attempt", venue, root)
    scenario.dispatch()
    gateway = scenario.gateway()
    gateway.start(failpoints=BOUNDARIES["E after the intent, before dispatch-start"])
    assert gateway.wait_exit(60) == -9
    backup = d.changelog_snapshot(scenario.settings)
    gateway.start()
    scenario.wait(scenario.rests, gateway, d.RUN_TIMEOUT_S)
    gateway.stop()
    d.restore_changelog(scenario.settings, backup)
    raw = backup[state_key(scenario.run_id)]
    assert raw is not None
    restored = decode_state(raw)
    before = len(scenario.journal())

    def rests_after_restore() -> bool:
        return d.at_rest(d.fold(scenario.journal()[before:], restored))

    gateway.start("--journal-restored")
    scenario.wait(rests_after_restore, gateway, d.RUN_TIMEOUT_S)
    outcome = scenario.outcome(restored=restored, since=before)
    outcome.notes.append(f"restored state: {[a.status.value for a in restored.actions]}")
    return outcome


def two_recovery_workers(venue: VenueProcess, root: Path) -> d.Outcome:
    """Two gateways and two recover commands race on one run with an unresolved attempt.

    The venue hides the accepted order for 4 s (within the gateway's 10 s quiet period, as a
    quiet period must be), so the first recovery is still open when the second request comes.
    """
    env = {
        "SLUICEGATE_VENUE_QUIET_PERIOD": "10s",
        "SLUICEGATE_GATEWAY_RECONCILIATION_BUDGET": "30s",
    }
    scenario = d.Scenario("two gateways and two recover commands on one run", venue, root, env)
    record = g.dispatch()
    venue.fault(action="drop", client_order_id=g.client_id(record.run_id, E), quiet_ms=4_000)
    a, b = scenario.gateway("gateway-a"), scenario.gateway("gateway-b")
    a.start()
    b.start()
    # Each is assigned only in a rebalance that includes the other, once both have joined.
    deadline = time.monotonic() + 60
    while "assigned" not in a.log() or "assigned" not in b.log():
        assert time.monotonic() < deadline, "the two gateways never shared the group"
        time.sleep(0.2)
    scenario.dispatch(record)
    scenario.wait(lambda: any(isinstance(r, AttemptStarted) for r in scenario.journal()), None, 60)

    def recover(who: str) -> None:
        now = g.now_ms()
        send_commands(
            scenario.settings,
            [RecoverRun(f"{who}-{now}", scenario.run_id, who, "drill", now, "live")],
        )

    racers = [threading.Thread(target=recover, args=(f"operator-{n}",)) for n in (1, 2)]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(30)
    scenario.wait(scenario.rests, None, d.RUN_TIMEOUT_S)
    return scenario.outcome()


def held_then_resolved(venue: VenueProcess, root: Path) -> d.Outcome:
    """E is accepted but answered 503 and every lookup fails: held when the budget is spent;
    the venue answers again, an operator asks for a lookup, the hold ends with the fill."""
    scenario = d.Scenario("E unknown past the budget: held, then resolved", venue, root)
    record = g.dispatch()
    client = g.client_id(record.run_id, E)
    venue.fault(action="error", accept=True, client_order_id=client)
    blind = venue.fault(
        action="error", accept=False, op="query", client_order_id=client, count=None
    )
    scenario.dispatch(record)
    gateway = scenario.gateway()
    gateway.start()
    scenario.wait(lambda: any(isinstance(r, ActionHeld) for r in scenario.journal()), gateway, 60)
    venue.admin_ok("DELETE", f"/paper/v1/faults/{blind['id']}")
    now = g.now_ms()
    send_commands(
        scenario.settings,
        [
            ResolveHold(
                f"resolve-{now}",
                scenario.run_id,
                f"{scenario.run_id}.entry",
                "retry_lookup",
                "the venue answers queries again",
                "drill-operator",
                now,
            )
        ],
    )

    def resolved_and_at_rest() -> bool:
        # A held run is at rest too: until the gateway has taken the command, the journal
        # still shows the hold, and stopping then loses the race with the resolution.
        records = scenario.journal()
        return any(isinstance(r, HoldResolved) for r in records) and d.at_rest(d.fold(records))

    scenario.wait(resolved_and_at_rest, gateway, d.RUN_TIMEOUT_S)
    return scenario.outcome()


SCENARIOS: dict[str, Callable[[VenueProcess, Path], d.Outcome]] = {
    **{name: boundary(name, failpoint) for name, failpoint in BOUNDARIES.items()},
    "P rejected by the venue": with_fault(
        "P rejected by the venue",
        lambda run: {"action": "reject", "client_order_id": g.client_id(run, P)},
    ),
    "N sink fails (503) after storing it": with_fault(
        "N sink fails (503) after storing it",
        lambda run: {
            "action": "error",
            "accept": True,
            "op": "notify",
            "client_order_id": g.client_id(run, N),
        },
    ),
    "N answer lost, channel cannot be looked up": with_fault(
        "N answer lost, channel cannot be looked up",
        lambda run: {"action": "drop", "op": "notify", "client_order_id": g.client_id(run, N)},
        env={"SLUICEGATE_NOTIFY_LOOKUP": "off"},
    ),
    "E deadline lapsed during downtime": lapsed_during_downtime(
        "E deadline lapsed during downtime", {}, window_ms=5_000
    ),
    "E approval lapsed during downtime": lapsed_during_downtime(
        "E approval lapsed during downtime",
        {"SLUICEGATE_GATEWAY_APPROVAL_VALIDITY": "3s"},
        window_ms=10 * 60_000,
    ),
    "article fixture": article_fixture,
    "zombie": zombie,
    "quiet period": quiet_period,
    "backup": backup_restore,
    "two recovery workers": two_recovery_workers,
    "held then resolved": held_then_resolved,
}


@pytest.fixture(scope="module")
def drills(tmp_path_factory: pytest.TempPathFactory) -> Iterator[d.Pool]:
    root = tmp_path_factory.mktemp("gateway-drill")
    (root / "venue").mkdir()
    started = time.monotonic()
    with running_venue(root / "venue", g.DRILL_VENUE) as venue:
        pool = d.Pool(width=6)
        # The longest first, so that they overlap with everything else.
        longest = ("quiet period", "held then resolved", "zombie")
        for name in sorted(SCENARIOS, key=lambda n: n not in longest):
            pool.submit(name, functools.partial(SCENARIOS[name], venue, root))
        yield pool
        pool.join()
    rows = [r for r in pool.results.values() if isinstance(r, d.Outcome)]
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(
        f"{d.TABLE_HEAD}\n"
        + "\n".join(r.row() for r in rows)
        + f"\n\n{len(rows)} scenarios in {time.monotonic() - started:.0f} s\n"
    )


# -- the checks -----------------------------------------------------------------------------


def of(outcome: d.Outcome, kind: type, slot: str | None = None) -> list[Any]:
    found = [r for r in outcome.records if isinstance(r, kind)]
    return [r for r in found if slot is None or getattr(r, "slot", None) == slot]


RECEIPTS = frozenset({"filled", "acknowledged", "rejected", "absent"})
UNSENT = frozenset({"expired", "not_needed"})


def one_order_each(outcome: d.Outcome, expected: dict[str, int] | None = None) -> None:
    want = {E: 1, P: 1, N: 1, **(expected or {})}
    assert outcome.orders == want, outcome.row()
    # Every action ends with a receipt or a hold (or, never sent, its expiry).
    for slot, status in outcome.statuses.items():
        ended = outcome.receipts[slot]
        assert ended.startswith("held:") or ended in RECEIPTS or status in UNSENT, outcome.row()


@pytest.mark.parametrize("name", list(BOUNDARIES))
def test_kill9_at_every_boundary_twice_one_order_per_action(drills: d.Pool, name: str) -> None:
    outcome = drills.result(name)
    one_order_each(outcome)
    assert outcome.holds == 0
    assert set(outcome.receipts.values()) <= {"filled", "acknowledged"}, outcome.row()
    # Twice in a row: the restart after the first kill is killed again inside the same window.
    assert outcome.kills == 2, outcome.row()
    if "no send" in name:
        # Killed after the intent committed and before the request left, twice: each restart
        # proved the attempt absent (after the quiet period) and tried once more.
        slot = {"E": E, "P": P, "N": N}[name[0]]
        assert outcome.attempts[slot] == 3, outcome.row()
        reasons = [a.reason for a in of(outcome, AttemptStarted, slot)]
        assert reasons == ["first", "after_proven_absence", "after_proven_absence"]
    elif not name.startswith("E before the intent"):
        assert set(outcome.attempts.values()) == {1}, outcome.row()


def test_protection_rejected_repeats_nothing_and_is_reported(drills: d.Pool) -> None:
    outcome = drills.result("P rejected by the venue")
    one_order_each(outcome, {P: 0})
    assert outcome.receipts == {E: "filled", P: "rejected", N: "acknowledged"}
    [notice] = [a for a in of(outcome, AttemptStarted, N)]
    assert orjson.loads(notice.request_json)["outcomes"] == {E: "filled", P: "rejected"}


def test_failed_notifications_never_repeat_an_order(drills: d.Pool) -> None:
    stored = drills.result("N sink fails (503) after storing it")
    one_order_each(stored)
    assert stored.attempts[N] == 1  # looked up, found: not posted again
    lost = drills.result("N answer lost, channel cannot be looked up")
    # At-least-once: the channel cannot say it has it, so it is posted once more after the
    # quiet period. A duplicate message, never a duplicate order.
    one_order_each(lost, {N: 2})
    assert lost.attempts == {E: 1, P: 1, N: 2}


def test_unsent_actions_whose_deadline_or_approval_lapsed_are_reassessed_not_sent(
    drills: d.Pool,
) -> None:
    for name, reason in (
        ("E deadline lapsed during downtime", "expired_before_send"),
        ("E approval lapsed during downtime", "authorization_lapsed"),
    ):
        outcome = drills.result(name)
        one_order_each(outcome, {E: 0, P: 0})
        assert [e.reason for e in of(outcome, ActionExpired, E)] == [reason]
        assert of(outcome, AttemptStarted, E) == []
        assert P not in outcome.statuses  # nothing to protect
        assert outcome.receipts[N] == "acknowledged"  # the report says so


def test_article_fixture_recovers_the_lost_fill_and_c18_selects_p1(drills: d.Pool) -> None:
    outcome = drills.result("article fixture")
    one_order_each(outcome)
    assert outcome.kills == 2 and outcome.attempts[E] == 1
    [started] = of(outcome, RecoveryStarted)
    # Recovery loads the checkpoint that says entry is next and the newer dispatch record.
    assert started.checkpoint_id == "C1"
    assert started.records_consulted == (f"AttemptStarted:{outcome.run_id}.entry#1",)
    assert started.routed_to_lookup == (f"{outcome.run_id}.entry",)
    [linked] = [r for r in of(outcome, ReceiptRecorded, E) if r.outcome == "filled"]
    assert linked.source == "reconciliation" and linked.venue_order_id is not None
    checkpoints = of(outcome, RunCheckpointed)
    advanced = next(c for c in checkpoints if c.checkpoint_id == "C2")
    assert advanced.next_tasks == (f"{outcome.run_id}.protection",)
    assert orjson.loads(advanced.completed_json)[f"{outcome.run_id}.entry"]["venue_order_id"] == (
        linked.venue_order_id
    )
    [receipt] = of(outcome, RecoveryReceiptRecorded)
    assert (receipt.checkpoint_id, receipt.checkpoint_advanced_to) == ("C1", "C2")
    assert receipt.next_permitted == (f"{outcome.run_id}.protection",)
    [evidence] = [o for o in orjson.loads(receipt.evidence_json) if o["observation"] == "order"]
    assert (evidence["venue_order_id"], evidence["observed_at_ms"]) == (
        linked.venue_order_id,
        linked.observed_at_ms,
    )
    # The protection path checked the exposure the venue reports before it was intended.
    assert of(outcome, QueryRequested, P)[0].query == "exposure"


def test_a_zombie_resumed_after_takeover_gets_no_order_accepted(drills: d.Pool) -> None:
    outcome = drills.result("zombie")
    one_order_each(outcome)
    attempts = of(outcome, AttemptStarted, E)
    assert [(a.attempt, a.owner_instance) for a in attempts] == [
        (1, "gateway-a"),
        (2, "gateway-b"),
    ]
    # The stale request left after all local checks (it was frozen right before the send),
    # with its attempt's timestamp: the venue refused it by its recv window.
    assert "Rejected(outside_recv_window)" in outcome.notes[0], outcome.notes


def test_not_found_inside_the_quiet_period_gives_no_second_order(drills: d.Pool) -> None:
    outcome = drills.result("quiet period")
    one_order_each(outcome)
    [attempt] = of(outcome, AttemptStarted, E)
    receipts = of(outcome, ReceiptRecorded, E)
    early = [r for r in receipts if r.status == "not_found"]
    assert early and all(r.outcome == "unknown" for r in early)
    assert all(
        r.queried_at_ms is not None and r.queried_at_ms < attempt.absence_after_ms for r in early
    )
    [filled] = [r for r in receipts if r.outcome == "filled"]
    assert filled.source == "reconciliation" and outcome.holds == 0
    assert filled.queried_at_ms is not None
    assert attempt.attempted_at_ms + 20_000 <= filled.queried_at_ms < attempt.absence_after_ms


def test_a_backup_that_predates_the_attempt_does_not_prove_absence(drills: d.Pool) -> None:
    outcome = drills.result("backup")
    one_order_each(outcome)
    assert outcome.attempts[E] == 0  # nothing was attempted again: the order was adopted
    started = [r for r in of(outcome, RecoveryStarted) if r.journal_origin == "backup"]
    assert started and started[0].absence_not_before_ms is not None
    [adopted] = [r for r in of(outcome, ReceiptRecorded, E) if r.outcome == "filled"]
    assert (adopted.attempt, adopted.source) == (0, "reconciliation")
    assert of(outcome, AttemptStarted) == []  # E, P and N: each looked up and found


def test_two_recovery_workers_on_one_run_one_owner(drills: d.Pool) -> None:
    outcome = drills.result("two recovery workers")
    one_order_each(outcome)
    # Whoever holds the run's partition decides for it. A rebalance may hand it over; the new
    # owner then restores and recovers before it attempts anything (or finishes the recovery
    # that is open).
    owner, recovering = None, False
    for record in outcome.records:
        by = getattr(record, "owner_instance", None) or getattr(record, "owner", None)
        if isinstance(record, AttemptStarted | RecoveryStarted | ActionHeld) and by != owner:
            handed_over = owner is not None
            assert not handed_over or recovering or isinstance(record, RecoveryStarted), record
            owner = by
        recovering = (recovering or isinstance(record, RecoveryStarted)) and not isinstance(
            record, RecoveryReceiptRecorded
        )
    asked = [r for r in of(outcome, RecoveryStarted) if r.requested_by.startswith("operator-")]
    # The second request found the first recovery open (its lookup waits out the venue's
    # hiding of the order) and changed nothing; at most one operator recovery advanced it.
    assert len(asked) == 1, [r.requested_by for r in of(outcome, RecoveryStarted)]
    assert len(of(outcome, RecoveryReceiptRecorded)) == len(of(outcome, RecoveryStarted))


def test_an_attempt_unresolved_past_the_budget_is_held_and_resolved_with_an_audit_record(
    drills: d.Pool,
) -> None:
    outcome = drills.result("held then resolved")
    one_order_each(outcome)
    assert outcome.holds == 0 and outcome.attempts == {E: 1, P: 1, N: 1}
    [held] = of(outcome, ActionHeld, E)
    assert (held.reason, held.owner, held.attempt) == (
        "reconciliation_budget_exhausted",
        "gateway-1",
        1,
    )
    [attempt] = of(outcome, AttemptStarted, E)
    assert held.held_since_ms >= attempt.attempted_at_ms + 20_000  # the drill's budget
    [resolved] = of(outcome, HoldResolved, E)
    assert (resolved.resolution, resolved.resolved_by, resolved.held_since_ms) == (
        "retry_lookup",
        "drill-operator",
        held.held_since_ms,
    )
    [filled] = [r for r in of(outcome, ReceiptRecorded, E) if r.outcome == "filled"]
    assert filled.source == "reconciliation" and filled.recorded_at_ms >= resolved.resolved_at_ms
