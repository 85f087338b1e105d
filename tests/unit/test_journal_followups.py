"""Entry, protection and notification are separate actions with separate failures."""

from __future__ import annotations

import dataclasses
from decimal import Decimal

import orjson

from schemas.commands import ResolveHold, VenueAnswered
from schemas.events import (
    ActionHeld,
    ActionIntended,
    AttemptStarted,
    ExposureRecorded,
    QueryRequested,
    RunCheckpointed,
)
from streams.core.journal import ExposureRequest, SendRequest
from tests.support.journal import (
    ENTRY_ID,
    NOTIFICATION_ID,
    PROTECTION_ID,
    RUN,
    SECOND,
    Venue,
    World,
    dispatch,
)

SLOTS = (ENTRY_ID, PROTECTION_ID, NOTIFICATION_ID)


def attempts(world: World) -> dict[str, int]:
    counted = dict.fromkeys(SLOTS, 0)
    for attempt in world.of(AttemptStarted):
        counted[attempt.action_id] += 1
    return counted


def statuses(world: World) -> tuple[str | None, ...]:
    return tuple(world.status(a) for a in SLOTS)


def test_protection_is_sized_from_reported_exposure_not_the_proposal() -> None:
    world = World()
    world.decide(dispatch(quantity="0.5"))
    world.settle()
    [exposure] = world.of(ExposureRecorded)
    assert (exposure.exposure_quantity, exposure.entry_executed_quantity) == ("0.4995", "0.5")
    [intent] = [e for e in world.of(ActionIntended) if e.action_id == PROTECTION_ID]
    assert (intent.quantity, intent.side, intent.depends_on) == ("0.4995", "sell", ENTRY_ID)
    assert orjson.loads(intent.sized_from_json or "{}")["exposure_quantity"] == "0.4995"
    protection = next(e for e in world.of(AttemptStarted) if e.action_id == PROTECTION_ID)
    body = orjson.loads(protection.request_json)
    assert body["quantity"] == "0.4995"
    assert body["protection"] == {"kind": "stop_loss", "stop_price": "95000"}


def test_protection_is_capped_at_the_entrys_fills() -> None:
    venue = Venue(fee=Decimal(-1))  # the account holds twice what this run bought
    world = World(venue)
    world.decide(dispatch(quantity="0.5"))
    world.settle()
    [intent] = [e for e in world.of(ActionIntended) if e.action_id == PROTECTION_ID]
    assert intent.quantity == "0.5"


def test_protection_is_capped_at_what_the_entry_brought_net_of_its_commission() -> None:
    # The account holds more BTC than this run bought (other runs' fills); the entry's fills
    # say the venue kept 0.0005 BTC as commission: the protection covers 0.4995, not 0.5, so
    # that it never takes coins another run's protection is about to cover.
    world = World(Venue(fee=Decimal(-1)))
    world.decide(dispatch(quantity="0.5"))
    world.perform()
    [answer] = world.answers
    assert isinstance(answer, VenueAnswered)
    fills = '[{"price":"97000","qty":"0.5","commission":"0.0005","commission_asset":"BTC"}]'
    world.answers = [dataclasses.replace(answer, fills_json=fills)]
    world.settle()
    [exposure] = world.of(ExposureRecorded)
    assert (exposure.exposure_quantity, exposure.entry_executed_quantity) == ("1", "0.4995")
    [intent] = [e for e in world.of(ActionIntended) if e.action_id == PROTECTION_ID]
    assert intent.quantity == exposure.sized_quantity == "0.4995"


def test_protection_is_rounded_down_to_the_venues_lot_step() -> None:
    # 0.001 bought, 0.1 % commission in BTC: 0.000999 held, which a venue with a 0.00001 step
    # refuses; the protection covers the 0.00099 the venue takes, never rounded up.
    world = World(Venue(lot_step="0.00001"))
    world.decide(dispatch(quantity="0.001"))
    world.settle()
    [exposure] = world.of(ExposureRecorded)
    assert (exposure.exposure_quantity, exposure.sized_quantity) == ("0.000999", "0.00099")
    assert exposure.lot_step == "0.00001"
    [intent] = [e for e in world.of(ActionIntended) if e.action_id == PROTECTION_ID]
    assert intent.quantity == "0.00099"


def test_less_than_one_lot_step_needs_no_protection_and_a_nonsense_step_is_ignored() -> None:
    below = World(Venue(lot_step="0.01"))
    below.decide(dispatch(quantity="0.001"))
    below.settle()
    [exposure] = below.of(ExposureRecorded)
    assert exposure.sized_quantity == "0"
    for step in ("0", "-0.001", "NaN", "lots"):
        world = World(Venue(lot_step=step))
        world.decide(dispatch(quantity="0.001"))
        world.settle()
        [exposure] = world.of(ExposureRecorded)
        assert (exposure.sized_quantity, exposure.lot_step) == ("0.000999", None), step


def test_protection_waits_for_exposure_and_is_not_intended_before() -> None:
    world = World()
    world.decide(dispatch())
    world.perform()
    world.deliver()
    kinds = [type(e) for e in world.history]
    query = kinds.index(QueryRequested)
    assert ActionIntended not in kinds[query:]  # not intended until the exposure is known
    assert isinstance(world.effects[0][1], ExposureRequest)


def test_rejected_entry_has_no_protection_and_is_reported_once() -> None:
    world = World(Venue(behaviour={"entry": "reject"}))
    world.decide(dispatch())
    world.settle()
    assert statuses(world) == ("rejected", None, "acknowledged")
    assert attempts(world) == {ENTRY_ID: 1, PROTECTION_ID: 0, NOTIFICATION_ID: 1}


def test_rejected_protection_repeats_nothing_and_is_reported() -> None:
    world = World(Venue(behaviour={"protection": "reject"}))
    world.decide(dispatch())
    world.settle()
    assert statuses(world) == ("filled", "rejected", "acknowledged")
    assert attempts(world) == dict.fromkeys(SLOTS, 1)
    notification = next(e for e in world.of(AttemptStarted) if e.action_id == NOTIFICATION_ID)
    assert orjson.loads(notification.request_json)["outcomes"] == {
        "entry": "filled",
        "protection": "rejected",
    }


def test_failed_notification_repeats_neither_entry_nor_protection() -> None:
    world = World(Venue(behaviour={"notification": "reject"}))
    world.decide(dispatch())
    world.settle()
    assert statuses(world) == ("filled", "acknowledged", "rejected")
    assert attempts(world) == dict.fromkeys(SLOTS, 1)
    assert world.of(RunCheckpointed)[-1].next_tasks == ()


def test_unknown_notification_is_reconciled_on_its_own() -> None:
    world = World()
    world.decide(dispatch())
    world.fault = lambda e: (
        "silent" if isinstance(e, SendRequest) and e.slot == "notification" else "ok"
    )
    for _ in range(60):
        world.step(5 * SECOND)
    assert statuses(world)[:2] == ("filled", "acknowledged")
    assert world.status(NOTIFICATION_ID) in ("reconciling", "held", "attempted")
    world.settle()
    assert attempts(world)[ENTRY_ID] == 1 and attempts(world)[PROTECTION_ID] == 1
    assert world.venue.accepted[RUN[4:] + "-E"] == 1


def test_protection_unknown_is_reconciled_without_touching_the_entry() -> None:
    world = World()
    world.decide(dispatch())
    world.fault = lambda e: (
        "unreached" if isinstance(e, SendRequest) and e.slot == "protection" else "ok"
    )
    for _ in range(3):
        world.step(1 * SECOND)
    assert world.status(PROTECTION_ID) == "reconciling"
    world.settle()
    assert statuses(world) == ("filled", "acknowledged", "acknowledged")
    assert attempts(world) == {ENTRY_ID: 1, PROTECTION_ID: 2, NOTIFICATION_ID: 1}
    assert world.venue.accepted[RUN[4:] + "-P"] == 1


def test_no_exposure_means_no_protection() -> None:
    venue = Venue(fee=Decimal(1))  # the whole fill is gone from the account when it is checked
    world = World(venue)
    world.decide(dispatch())
    world.settle()
    assert statuses(world) == ("filled", "not_needed", "acknowledged")
    assert attempts(world)[PROTECTION_ID] == 0


def test_exposure_unavailable_holds_the_protection_and_the_run_reports_it() -> None:
    world = World()
    world.decide(dispatch())
    world.fault = lambda e: "lost" if isinstance(e, ExposureRequest) else "ok"
    for _ in range(40):
        world.step(5 * SECOND)
    held = [e for e in world.of(ActionHeld) if e.action_id == PROTECTION_ID]
    assert [e.reason for e in held] == ["exposure_unavailable"]
    assert statuses(world) == ("filled", "held", "acknowledged")
    # The operator retries; the venue answers now; the protection is sized and placed.
    world.fault = lambda e: "ok"
    retry = ResolveHold("h-1", RUN, PROTECTION_ID, "retry_lookup", "venue back", "ops", world.now)
    world.decide(retry)
    world.settle()
    assert world.status(PROTECTION_ID) == "acknowledged"
    assert attempts(world) == dict.fromkeys(SLOTS, 1)


def test_resting_entry_without_fills_needs_no_protection_yet() -> None:
    world = World(Venue(behaviour={"entry": "rest"}))
    world.decide(dispatch(limit_price="90000"))
    world.settle()
    assert statuses(world) == ("acknowledged", None, "acknowledged")
