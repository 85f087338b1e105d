"""The execution gateway as real processes for tests: dispatches, gateway processes, the journal.

* :func:`dispatch` builds an ``ActionDispatched`` the way the gate does: a ``CandidateProposed``
  and a ``DispatchRequested`` (real event classes, realistic fields) decided by the real gate
  core, whose ``ActionDispatched`` is produced onto ``actions`` keyed by run id.
* :class:`GatewayProcess` is ``sluicegate gateway`` as a child process (ended by its pid), with
  its settings, failpoints and log.
* :func:`journal` reads the ``journal`` topic back (read_committed) and decodes it.

Run ids are random, so that tests sharing one paper venue never share a client order id.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from schemas.codec import decode, encode
from schemas.events import ActionDispatched, CandidateProposed, DispatchRequested
from schemas.topics import ACTIONS, JOURNAL
from streams.core import gate
from streams.core.journal import client_order_id_for
from streams.kafka.clients import idempotent_producer
from streams.settings import Settings
from tests.support.kafka import read_topic
from tests.support.venue import ADMIN_TOKEN, VenueProcess

ROOT = Path(__file__).resolve().parents[2]
API_KEY, API_SECRET = "drill-key", "drill-secret"
DRILL_VENUE = f"""
admin_token = "{ADMIN_TOKEN}"

[[symbols]]
symbol = "BTCUSDT"
base = "BTC"
quote = "USDT"
price = "97000.00"
tick_size = "0.01"
step_size = "0.00001"
min_notional = "5"

[[accounts]]
name = "drill"
api_key = "{API_KEY}"
api_secret = "{API_SECRET}"
balances = {{ USDT = "100000000", BTC = "0" }}
"""
"""One account with no BTC: what a protection covers is exactly what the entries bought."""

PROTECTION = '{"kind":"take_profit","limit_price":"99000","stop_price":"99000"}'
"""A resting LIMIT sell above the price: the venue acknowledges it and it stays open."""
NOTIFICATION = '{"channel":"ops","text":"entry report"}'
SCOPE = "paper|account=drill|instrument=BTCUSDT|side=buy"

FAST = {
    "SLUICEGATE_VENUE_RECV_WINDOW": "2s",
    "SLUICEGATE_VENUE_QUIET_PERIOD": "1s",
    "SLUICEGATE_GATEWAY_SEND_TIMEOUT": "2s",
    "SLUICEGATE_GATEWAY_LOOKUP_INTERVAL": "500ms",
    "SLUICEGATE_GATEWAY_RECONCILIATION_BUDGET": "20s",
    "SLUICEGATE_GATEWAY_FOLLOWUP_WINDOW": "2m",
}
"""Drill timing: absence can be proven 2 s + uncertainty + 1 s after an attempt."""


def new_run_id() -> str:
    return f"run-{uuid.uuid4().hex[:24]}"


def client_id(run_id: str, slot: str) -> str:
    return client_order_id_for(run_id, slot)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def dispatch(
    run_id: str | None = None,
    *,
    at_ms: int | None = None,
    kind: str = "entry",
    quantity: str | None = "0.01",
    limit_price: str | None = None,
    protection: str | None = PROTECTION,
    notification: str | None = NOTIFICATION,
    window_ms: int = 10 * 60_000,
    clock_uncertainty_ms: int = 100,
    generation: int = 1,
) -> ActionDispatched:
    """The gate's ``ActionDispatched`` for a run's proposal, decided by the real gate core."""
    run = run_id or new_run_id()
    now = now_ms() if at_ms is None else at_ms
    source = now - 2_000
    proposal = CandidateProposed(
        candidate_id=f"{run}.{kind}",
        run_id=run,
        admission_key=f"btc-breakout/paper/tradingview/{run}",
        scope_key=SCOPE,
        subscription="btc-breakout",
        environment="paper",
        kind=kind,
        side="buy" if kind == "entry" else "sell",
        quantity=quantity,
        notional=None if quantity is not None else "1000",
        limit_price=limit_price,
        max_slippage_bps=None,
        params_json='{"rule":"breakout-v1"}',
        protection_json=protection if kind == "entry" else None,
        notification_json=notification,
        reassessment_of=None,
        venue="binance",
        instrument="BTCUSDT",
        account="drill",
        generation=str(generation),
        generation_kind="number",
        expires_at_ms=source + window_ms,
        source_time_ms=source,
        validity_source_time="candle_close",
        validity_window_ms=window_ms,
        clock_uncertainty_ms=clock_uncertainty_ms,
        workflow_revision=1,
        exit_window_ms=None if kind == "entry" else window_ms,
        enqueued_at_ms=source + 200,
        dequeued_at_ms=source + 400,
        proposed_at_ms=now - 100,
    )
    request = DispatchRequested(
        candidate_id=proposal.candidate_id,
        run_id=run,
        admission_key=proposal.admission_key,
        scope_key=SCOPE,
        kind=kind,
        approvals=("analysis",),
        expires_at_ms=proposal.expires_at_ms,
        source_time_ms=source,
        validity_source_time="candle_close",
        validity_window_ms=window_ms,
        clock_uncertainty_ms=clock_uncertainty_ms,
        workflow_revision=1,
        requested_at_ms=now - 50,
    )
    state = None
    for command in (gate.ProposeCandidate(proposal), gate.RequestDispatch(request)):
        for event in gate.decide(state, command, now - 50):
            state = gate.evolve(state, event)
            if isinstance(event, ActionDispatched):
                return event
    raise AssertionError("the gate did not dispatch the candidate")


class ActionsProducer:
    """A long-lived producer onto ``actions`` (keyed by run id, as the gate produces), so that
    a record's timestamp is when it was sent, not when a new producer got ready."""

    def __init__(self, settings: Settings) -> None:
        self.topic = settings.topic(ACTIONS)
        self._producer = idempotent_producer(
            settings, client_id="test-gate", tuning={"linger.ms": 0}
        )

    def send(self, records: Iterable[Any]) -> None:
        for record in records:
            self._producer.produce(self.topic, key=record.run_id.encode(), value=encode(record))
        assert self._producer.flush(30) == 0


def produce(settings: Settings, records: Iterable[Any]) -> None:
    """Produce records onto ``actions``, keyed by their run id (as the gate does)."""
    ActionsProducer(settings).send(records)


def journal(settings: Settings, run_id: str | None = None) -> list[Any]:
    """Every committed record of ``journal`` (of one run), decoded, in partition order."""
    records = [decode(m.value() or b"") for m in read_topic(settings, settings.topic(JOURNAL))]
    return [r for r in records if run_id is None or getattr(r, "run_id", None) == run_id]


def gateway_env(settings: Settings, venue: VenueProcess, **extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "SLUICEGATE_TOPIC_PREFIX": settings.topic_prefix,
        "SLUICEGATE_PARTITIONS": str(settings.partitions),
        "SLUICEGATE_STATE_DIR": str(settings.state_dir),
        "SLUICEGATE_VENUE": "paper",
        "SLUICEGATE_VENUE_URL": venue.base_url,
        "SLUICEGATE_VENUE_API_KEY": API_KEY,
        "SLUICEGATE_VENUE_API_SECRET": API_SECRET,
        "SLUICEGATE_NOTIFY_URL": venue.base_url + "/paper/v1/notifications",
        "SLUICEGATE_NOTIFY_LOOKUP": "on",
        "PYTHONUNBUFFERED": "1",
        **FAST,
    }
    env.pop("SLUICEGATE_FAILPOINTS", None)
    env.update(extra)
    return env


@dataclass
class GatewayProcess:
    """``sluicegate gateway`` as a child process (see the module docstring)."""

    settings: Settings
    venue: VenueProcess
    log_dir: Path
    instance_id: str = "gateway-1"
    env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None
    exits: list[int] = field(default_factory=list)

    @property
    def log_path(self) -> Path:
        return self.log_dir / f"{self.instance_id}.log"

    def start(self, *args: str, failpoints: str | None = None) -> None:
        extra = dict(self.env)
        if failpoints:
            extra["SLUICEGATE_FAILPOINTS"] = failpoints
        with self.log_path.open("ab") as log:
            log.write(f"--- start {args} failpoints={failpoints}\n".encode())
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "sluicegate.cli",
                    "gateway",
                    "--instance-id",
                    self.instance_id,
                    *args,
                ],
                cwd=ROOT,
                env=gateway_env(self.settings, self.venue, **extra),
                stdout=log,
                stderr=log,
            )

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def wait_exit(self, timeout_s: float) -> int:
        assert self.process is not None
        code = self.process.wait(timeout_s)
        self.exits.append(code)
        return code

    def kill9(self) -> None:
        assert self.process is not None
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        self.exits.append(self.process.wait(30))

    def signal(self, signum: int) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signum)

    def stop(self) -> None:
        """SIGTERM by pid, then SIGKILL after 30 s."""
        if self.process is None or self.process.poll() is not None:
            return
        os.kill(self.process.pid, signal.SIGTERM)
        try:
            self.exits.append(self.process.wait(30))
        except subprocess.TimeoutExpired:
            os.kill(self.process.pid, signal.SIGKILL)
            self.exits.append(self.process.wait(30))

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def venue_orders(venue: VenueProcess, client_ids: Sequence[str]) -> Counter[str]:
    """How many orders the venue ever accepted under each client order id (admin API)."""
    counts = venue.admin_ok("GET", "/paper/v1/orders?account=drill")["count_by_client_order_id"]
    return Counter({c: int(counts.get(c, 0)) for c in client_ids})


def notifications(venue: VenueProcess) -> dict[str, Any]:
    """Every notification the venue's sink holds, by idempotency key."""
    rows = venue.admin_ok("GET", "/paper/v1/notifications")["notifications"]
    return {row["idempotency_key"]: row for row in rows}


def kinds(records: Iterable[Any]) -> list[str]:
    return [type(r).__name__ for r in records]
