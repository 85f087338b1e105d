"""What the commands that run a stream app on the engine share: their options, logging, and
running until SIGTERM/SIGINT (``processor``, ``gate``, ``gateway``)."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

from sluicegate.probes import EngineProbes, Probes
from streams import logs
from streams.engine.status import InstanceStatus, healthy
from streams.heartbeat import Heartbeat
from streams.settings import Settings, load_settings

if TYPE_CHECKING:
    from sluicegate.health import HealthServer
    from streams.engine.batch import ProcessorStats
    from streams.engine.effects import EffectRunner


class Named(Protocol):
    @property
    def name(self) -> str: ...


class Runs(Protocol):
    status: InstanceStatus
    stats: ProcessorStats
    instance_id: str
    effects: EffectRunner | None

    @property
    def app(self) -> Named: ...

    def run(self) -> None: ...

    def stop(self) -> None: ...


class Counted(Protocol):
    records: int
    events: int
    batches: int
    aborts: int
    producers_renewed: int
    restarts: int
    forwarded: int
    expired: int
    restored_records: int


def counts(stats: Counted, seconds: float) -> str:
    """The closing line of an instance: what it read, wrote and restored, and for how long."""
    return (
        f"records={stats.records} events={stats.events} batches={stats.batches} "
        f"aborts={stats.aborts} renewed={stats.producers_renewed} restarts={stats.restarts} "
        f"forwarded={stats.forwarded} expired={stats.expired} "
        f"restored={stats.restored_records} in {seconds:.1f} s"
    )


def add_instance_id(parser: argparse.ArgumentParser, *, default: str, env_var: str) -> None:
    parser.add_argument(
        "--instance-id",
        default=None,
        help=f"stable id of this instance (default ${env_var} or {default}); "
        "reuse it on restart, never run two live instances with one id",
    )


def instance_id(args: argparse.Namespace, *, default: str, env_var: str) -> str:
    """``--instance-id``, else ``$env_var``, else ``default``."""
    chosen: str = args.instance_id or os.environ.get(env_var, default)
    return chosen


def health_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` of ``--health`` (an argparse ``type``)."""
    from sluicegate.health import parse_address  # the HTTP server, only when asked for

    try:
        return parse_address(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_health_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--health",
        type=health_address,
        metavar="HOST:PORT",
        default=os.environ.get("SLUICEGATE_HEALTH") or None,
        help="serve GET /healthz, /readyz and /metrics there (default $SLUICEGATE_HEALTH; none "
        "if unset); a port alone binds loopback",
    )


def add_batch_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--batch-size", type=int, default=2000, help="most records in one transaction"
    )
    parser.add_argument(
        "--commit-interval-ms",
        type=int,
        default=100,
        help="target time of one transaction; batches are sized to commit about this often",
    )


def start_logging(component: str) -> Settings:
    """Log this process as ``component`` in ``SLUICEGATE_LOG_FORMAT`` (``streams/logs.py``;
    text by default), then load the settings, their Kafka clients logging into it: a setting
    that stops the command is already reported in that format."""
    setup = logs.configure(component)
    return replace(load_settings(), kafka_logger=setup.kafka_logger)


def serve_probes(
    probes: Probes,
    address: tuple[str, int] | None,
    log: logging.Logger | None = None,
) -> HealthServer | None:
    """Serve a component's probes on ``address`` (``--health``; nothing when ``None``) until
    the server returned is closed, and log where on ``log``; an address that cannot be bound
    is a :class:`~sluicegate.errors.SluicegateError`."""
    if address is None:
        return None
    from sluicegate.health import HealthServer  # the HTTP server, only when asked for

    served = HealthServer(probes, address)
    (log or logging.getLogger("sluicegate.health")).info(
        "health probes on http://%s:%d (/healthz, /readyz)", *served.address
    )
    return served


def run_until_signalled(
    processor: Runs,
    log: logging.Logger,
    summary: Callable[[float], str],
    health: tuple[str, int] | None = None,
) -> int:
    """Run ``processor`` until SIGTERM or SIGINT asks it to stop; log ``summary(seconds)``
    when it ends, however it ends.

    ``health`` (host, port) serves the instance's probes there while it runs
    (``sluicegate/health.py``); an address that cannot be bound stops the command before the
    instance starts.

    Under ``sluicegate serve`` (``SLUICEGATE_HEARTBEAT_FD``), the instance beats while its
    status is healthy (``streams/heartbeat.py``): a frozen or stalled instance is restarted.

    SIGUSR1 (``kill -USR1 <pid>``) logs the same counters so far, on a line that starts with
    ``counters:``, without stopping anything: what an operator reads to see how many
    transactions a running instance committed for how many records. The line comes from the
    main thread at its next Python instruction, so at most one poll (the commit interval)
    after the signal; the counters count committed transactions only.
    """

    started = time.monotonic()  # before the handlers: SIGUSR1 may come at once

    def stop(_signum: int, _frame: object) -> None:
        processor.stop()

    def report(_signum: int, _frame: object) -> None:
        log.info("counters: %s", summary(time.monotonic() - started))

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGUSR1, report)
    beating = threading.Event()
    heart = Heartbeat.from_environment()
    if heart is not None:
        status = processor.status
        heart.keep_beating(
            lambda: healthy(status.snapshot(), status.clock(), status.stalled_after_s), beating
        )
    effects = processor.effects
    described = EngineProbes(
        processor.status,
        processor.stats,
        processor.app.name,
        processor.instance_id,
        effects.stats if effects is not None else None,
    )
    probes = serve_probes(described, health, log)
    try:
        processor.run()
    finally:
        beating.set()
        log.info("%s", summary(time.monotonic() - started))
        if probes is not None:
            probes.close()
    return 0
