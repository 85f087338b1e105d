"""``sluicegate worker``: a demonstration branch worker built on the SDK."""

from __future__ import annotations

import argparse
import signal
import time
from typing import TYPE_CHECKING

from sluicegate import instance_metrics
from sluicegate.commands.engine import add_health_option, serve_probes, start_logging
from sluicegate.probes import LoopProbes
from streams.heartbeat import Heartbeat

if TYPE_CHECKING:
    from consumers.branch_worker import BranchWorker


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    worker = subparsers.add_parser(
        "worker", help="a demonstration branch worker (completes every branch task it takes)"
    )
    worker.add_argument("--slot", action="append", default=None, help="serve only this slot")
    worker.add_argument(
        "--deadline-slot",
        action="append",
        default=None,
        help="slot whose deadline is checked when its task is taken (repeatable; default: "
        "the run's proposing and approving slots, and every slot of a run without actions). "
        "The others, like journal, may finish after it for the record.",
    )
    worker.add_argument(
        "--clock-uncertainty-ms",
        type=int,
        default=0,
        help="least allowance added to now at the deadline check (the run's, from its "
        "task, when larger)",
    )
    worker.add_argument(
        "--group",
        default="branch-workers",
        help="consumer group (under the topic prefix); workers serving different slots need "
        "different groups, as each group takes every task once",
    )
    add_health_option(worker)
    worker.set_defaults(func=cmd_worker)


def cmd_worker(args: argparse.Namespace) -> int:
    from consumers.demo_handler import demo_handler
    from sluicegate import bootstrap

    settings = start_logging("worker")
    worker = bootstrap.branch_worker(
        settings,
        demo_handler,
        slots=args.slot,
        deadline_slots=args.deadline_slot,
        clock_uncertainty_ms=args.clock_uncertainty_ms,
        name="demo-worker",
        group=args.group,
    )

    def stop(_signum: int, _frame: object) -> None:
        worker.stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    heart = Heartbeat.from_environment()  # under `sluicegate serve`
    if heart is not None:
        heart.keep_beating(lambda: worker.alive(time.monotonic()), worker.stop_event)
    probes = serve_probes(worker_probes(worker), args.health)
    try:
        worker.run()
    finally:
        if probes is not None:
            probes.close()
    return 0


def worker_probes(worker: BranchWorker) -> LoopProbes:
    """The worker's ``/healthz`` and ``/readyz``: both :meth:`BranchWorker.alive` (its loop
    came round, or a handler returned, within 60 s); its ``/metrics``: tasks handled and
    reports by kind (``sluicegate/instance_metrics.py``)."""

    def alive() -> bool:
        return worker.alive(time.monotonic())

    def details() -> dict[str, object]:
        return {"loop_seconds_ago": round(time.monotonic() - worker.came_round_at, 3)}

    def page() -> str:
        return instance_metrics.render_worker(
            worker.name,
            worker.handled,
            dict(worker.reports),  # a copy: the worker's thread adds to it
            healthy=alive(),
            loop_seconds_ago=time.monotonic() - worker.came_round_at,
        )

    return LoopProbes(alive=alive, ready=alive, details=details, page=page)
