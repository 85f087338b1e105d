"""The execution gateway rides out a broker restart with orders in flight: one order each.

Runs are dispatched while the broker goes down and comes back. The venue's answers to sends
that were in flight when it went down cannot be journaled until it is back (their
transactions fail); the gateway must neither exit nor send again what it already sent: each
such attempt is reconciled by its client order id. Afterwards the venue holds exactly one
order per entry and per protection, one post per notification, and every action is at rest.

Seen before the fix: after the restart, librdkafka's ``send_offsets_to_transaction`` never
returned (its static consumer had been fenced meanwhile), and the gateway processed nothing
more; 240 s later no run was at rest. The call is now given up at its timeout + 10 s and
the instance starts over in place (``streams/engine/bounded.py``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from streams.kafka.topics import ensure_topics
from tests.support import drills as d
from tests.support import gateway as g
from tests.support.admission_drill import broker
from tests.support.kafka import unique_settings, wait_until
from tests.support.venue import VenueProcess, running_venue

pytestmark = [pytest.mark.drill, pytest.mark.exclusive, pytest.mark.timeout(600)]

RUNS = 12


@pytest.fixture(scope="module")
def venue(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VenueProcess]:
    with running_venue(tmp_path_factory.mktemp("venue"), g.DRILL_VENUE) as process:
        yield process


def test_the_gateway_rides_out_a_broker_restart_with_one_order_per_action(
    venue: VenueProcess, tmp_path: Path
) -> None:
    settings = unique_settings(partitions=3)
    ensure_topics(settings)
    gateway = g.GatewayProcess(settings, venue, tmp_path)
    producer = g.ActionsProducer(settings)
    # The first placements are performed at once and answered 8 s later: in flight when the
    # broker goes, answered while it is away.
    venue.fault(action="hold", op="place", hold_ms=8_000, count=RUNS // 2)
    gateway.start()
    records = [g.dispatch() for _ in range(RUNS)]
    before, after = records[: RUNS // 2], records[RUNS // 2 :]
    producer.send(before)

    def attempted(run_id: str) -> bool:
        return any(type(r).__name__ == "AttemptStarted" for r in g.journal(settings, run_id))

    # Down while the first runs are under way (some sends in flight, some not yet made).
    wait_until(lambda: attempted(before[0].run_id), timeout_s=60, interval_s=0.2)
    started = time.monotonic()
    broker("down")
    time.sleep(5)  # the broker away: a wall-clock outage, not a test's wait
    broker("up")
    print(f"\nbroker away for {time.monotonic() - started:.1f} s", file=sys.stderr)
    producer.send(after)

    def at_rest() -> bool:
        return all(d.at_rest(d.fold(g.journal(settings, r.run_id))) for r in records)

    try:
        wait_until(lambda: at_rest() or not gateway.alive(), timeout_s=240, interval_s=2.0)
        assert gateway.alive(), gateway.log_path.read_text(errors="replace")[-4000:]
        assert at_rest()
    finally:
        gateway.stop()
    ids = [g.client_id(r.run_id, slot) for r in records for slot in ("entry", "protection")]
    orders = g.venue_orders(venue, ids)
    sink = g.notifications(venue)
    posts = [
        int(sink.get(g.client_id(r.run_id, "notification"), {}).get("posts", 0)) for r in records
    ]
    counters = [line for line in gateway.log_path.read_text().splitlines() if " records=" in line]
    print(
        f"orders per action: {sorted(set(orders.values()))}, posts: {sorted(set(posts))}; "
        f"the gateway's counters: {counters[-1].partition(' records=')[2] if counters else '?'}",
        file=sys.stderr,
    )
    assert set(orders.values()) == {1}, orders
    assert set(posts) == {1}, posts
