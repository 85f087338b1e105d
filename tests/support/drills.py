"""Crash drills of the execution gateway: scenarios, each on its own topics, one shared venue.

A scenario produces one run's ``ActionDispatched`` (entry E, protection P, notification N),
drives ``sluicegate gateway`` processes through failpoints (a real SIGKILL or SIGSTOP from
inside, at an exact commit boundary) and restarts, waits until the run is at rest, and
returns an :class:`Outcome`: the venue's orders per action (counted by its admin API), the
notifications its sink received, each action's final status and receipt, holds and kills.

The scenarios are independent (own topic prefix, own consumer group, own run id; the venue is
shared and keyed by client order id), so the drill module runs them concurrently.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from schemas.events import ActionDispatched
from schemas.topics import GATEWAY_CHANGELOG
from streams.core.journal import RunJournal, evolve, needs_recovery, next_due_ms
from streams.core.journal.lifecycle import SETTLED, ActionStatus
from streams.kafka.clients import idempotent_producer
from streams.kafka.topics import ensure_topics
from streams.settings import Settings
from tests.support import gateway as g
from tests.support.kafka import read_topic, unique_settings
from tests.support.venue import VenueProcess

SLOTS = ("entry", "protection", "notification")
RUN_TIMEOUT_S = 90.0


@dataclass
class Outcome:
    """What one scenario left behind (a row of the drill's table)."""

    name: str
    run_id: str
    kills: int = 0
    orders: dict[str, int] = field(default_factory=dict)
    statuses: dict[str, str] = field(default_factory=dict)
    receipts: dict[str, str] = field(default_factory=dict)
    attempts: dict[str, int] = field(default_factory=dict)
    holds: int = 0
    seconds: float = 0.0
    records: list[Any] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def row(self) -> str:
        def cell(values: dict[str, Any]) -> str:
            return " ".join(f"{s[0].upper()}={values.get(s, '-')}" for s in SLOTS)

        return (
            f"| {self.name} | {self.kills} | {cell(self.orders)} | {cell(self.receipts)} "
            f"| {cell(self.attempts)} | {self.holds} | {self.seconds:.0f} s |"
        )


TABLE_HEAD = (
    "| boundary / fault | kills | venue orders (E, P; N = sink posts) | final receipt | "
    "attempts | holds | time |\n|---|---|---|---|---|---|---|"
)


def fold(records: list[Any], state: RunJournal | None = None) -> RunJournal | None:
    """The run's state after ``records`` (from ``state``: e.g. one restored from a backup)."""
    for record in records:
        state = evolve(state, record)
    return state


def at_rest(state: RunJournal | None) -> bool:
    """Nothing left to do: no recovery to run, no timer set, every action settled or held."""
    if state is None or state.primary is None:
        return False
    return not needs_recovery(state) and next_due_ms(state) is None


class Scenario:
    """One run on its own topics (see the module docstring)."""

    def __init__(
        self, name: str, venue: VenueProcess, root: Path, env: dict[str, str] | None = None
    ) -> None:
        self.name = name
        self.venue = venue
        self.started = time.monotonic()
        self.directory = root / name.replace(" ", "-").replace(",", "").replace("/", "-")
        self.directory.mkdir(parents=True, exist_ok=True)
        self.settings: Settings = unique_settings(partitions=1)
        ensure_topics(self.settings)
        self.env = dict(env or {})
        self.gateways: dict[str, g.GatewayProcess] = {}
        self.record: ActionDispatched | None = None
        self.producer = g.ActionsProducer(self.settings)

    def gateway(self, instance_id: str = "gateway-1") -> g.GatewayProcess:
        if instance_id not in self.gateways:
            self.gateways[instance_id] = g.GatewayProcess(
                self.settings, self.venue, self.directory, instance_id, env=self.env
            )
        return self.gateways[instance_id]

    @property
    def run_id(self) -> str:
        assert self.record is not None
        return self.record.run_id

    def dispatch(self, record: ActionDispatched | None = None, **kwargs: Any) -> None:
        self.record = record or g.dispatch(**kwargs)
        self.producer.send([self.record])

    def journal(self) -> list[Any]:
        return g.journal(self.settings, self.run_id)

    def wait(
        self, done: Callable[[], bool], gateway: g.GatewayProcess | None, timeout_s: float
    ) -> bool:
        """Until ``done()`` (True) or ``gateway`` exits (False)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if gateway is not None and not gateway.alive():
                assert gateway.process is not None
                gateway.exits.append(gateway.process.returncode)
                return False
            if done():
                return True
            time.sleep(0.5)
        raise TimeoutError(f"{self.name}: not at rest after {timeout_s:.0f} s")

    def rests(self) -> bool:
        return at_rest(fold(self.journal()))

    def run_twice_then_clean(self, failpoint: str, again: str, *args: str) -> None:
        """Start with ``failpoint`` until it kills the gateway; start with ``again`` (a kill
        inside the same window); then, if that start was killed too, once without; each time
        until the run is at rest."""
        gateway = self.gateway()
        for armed in (failpoint, again, None):
            gateway.start(*args, failpoints=armed)
            if self.wait(self.rests, gateway, RUN_TIMEOUT_S):
                return
        raise AssertionError(f"{self.name}: the gateway without failpoints exited")

    def outcome(self, *, restored: RunJournal | None = None, since: int = 0) -> Outcome:
        """Stop the gateways and count; ``restored``/``since``: the run's state is the
        restored one followed by the journal's records from index ``since`` on."""
        for gateway in self.gateways.values():
            gateway.stop()
        records = self.journal()[since:]
        state = fold(records, restored)
        out = Outcome(self.name, self.run_id, records=records)
        out.kills = sum(code == -9 for gw in self.gateways.values() for code in gw.exits)
        ids = [g.client_id(self.run_id, slot) for slot in SLOTS]
        counts = g.venue_orders(self.venue, ids)
        sink = g.notifications(self.venue)
        for slot, client in zip(SLOTS, ids, strict=True):
            if slot == "notification":
                out.orders[slot] = int(sink.get(client, {}).get("posts", 0))
            else:
                out.orders[slot] = counts[client]
        assert state is not None
        for action in state.actions:
            out.statuses[action.slot] = action.status.value
            out.attempts[action.slot] = len(action.attempts)
            if action.status is ActionStatus.HELD:
                out.receipts[action.slot] = f"held:{action.hold.reason if action.hold else '?'}"
                out.holds += 1
            elif action.receipt is not None:
                out.receipts[action.slot] = action.receipt.outcome
            else:
                out.receipts[action.slot] = action.status.value
            assert action.status in SETTLED or action.status is ActionStatus.HELD, action
        out.seconds = time.monotonic() - self.started
        return out

    def pause_resume(self, gateway: g.GatewayProcess, then: Callable[[], None]) -> None:
        """Wait until ``gateway`` stopped itself (SIGSTOP), run ``then``, SIGCONT it."""
        assert gateway.process is not None
        deadline = time.monotonic() + 60
        while not stopped(gateway.process.pid):
            assert time.monotonic() < deadline, f"{self.name}: the gateway never stopped"
            time.sleep(0.05)
        then()
        gateway.signal(18)  # SIGCONT


def stopped(pid: int) -> bool:
    """Whether process ``pid`` is stopped: every thread of it in state ``T``
    (``/proc/<pid>/task/<tid>/stat``). SIGSTOP stops the threads one by one; until the last
    has stopped, one of them (a Kafka client's, a writer) may still fetch or commit."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
        states = []
        for tid in tasks:
            with open(f"/proc/{pid}/task/{tid}/stat") as stat:
                states.append(stat.read().rpartition(")")[2].split()[0])
    except FileNotFoundError:
        return False
    return bool(states) and all(state == "T" for state in states)


def children_running(parent: int, marker: str) -> list[int]:
    """Live (not zombie) children of ``parent`` whose command line contains ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rpartition(")")[2].split()
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                command = cmdline.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(fields[1]) == parent and fields[0] != "Z" and marker in command:
            found.append(int(entry))
    return found


def changelog_snapshot(settings: Settings) -> dict[str, bytes | None]:
    """The gateway changelog's content now (key -> latest value), partition 0."""
    content: dict[str, bytes | None] = {}
    for message in read_topic(settings, settings.topic(GATEWAY_CHANGELOG)):
        key = message.key()
        content[bytes(key or b"").decode()] = message.value()
    return content


def restore_changelog(settings: Settings, snapshot: dict[str, bytes | None]) -> int:
    """Make the changelog say what ``snapshot`` says again, as a restore from that backup
    does: a tombstone for every key written since, then every key's old value. Returns the
    number of keys the restore took back."""
    now = changelog_snapshot(settings)
    producer = idempotent_producer(settings, client_id="test-restore")
    topic = settings.topic(GATEWAY_CHANGELOG)
    newer = [k for k in now if k not in snapshot and now[k] is not None]
    for key in newer:
        producer.produce(topic, key=key.encode(), value=None, partition=0)
    for key, value in snapshot.items():
        producer.produce(topic, key=key.encode(), value=value, partition=0)
    assert producer.flush(30) == 0
    return len(newer) + sum(1 for k in snapshot if now.get(k) != snapshot[k])


class Pool:
    """Runs scenario functions concurrently, at most ``width`` at once."""

    def __init__(self, width: int) -> None:
        self._slots = threading.Semaphore(width)
        self.results: dict[str, Outcome | BaseException] = {}
        self._threads: dict[str, threading.Thread] = {}

    def submit(self, name: str, fn: Callable[[], Outcome]) -> None:
        def run() -> None:
            with self._slots:
                try:
                    self.results[name] = fn()
                except BaseException as e:
                    self.results[name] = e

        thread = threading.Thread(target=run, name=name, daemon=True)
        self._threads[name] = thread
        thread.start()

    def result(self, name: str, timeout_s: float = 600) -> Outcome:
        self._threads[name].join(timeout_s)
        result = self.results.get(name)
        if isinstance(result, BaseException):
            raise result
        assert result is not None, f"{name} did not finish"
        return result

    def join(self) -> None:
        for thread in self._threads.values():
            thread.join(600)
