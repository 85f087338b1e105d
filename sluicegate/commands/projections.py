"""``sluicegate projector``, ``sluicegate projections rebuild [--verify]`` and
``sluicegate projections check`` (and ``prune``, from :mod:`.prune`)."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from types import FrameType
from typing import TYPE_CHECKING

from projections.share import Share
from sluicegate import instance_metrics
from sluicegate.commands.engine import add_health_option, serve_probes, start_logging
from sluicegate.commands.options import positive_wait_seconds
from sluicegate.commands.prune import add_prune, add_prune_every_option, prune_schedule
from sluicegate.probes import LoopProbes
from streams.heartbeat import Heartbeat
from streams.settings import load_settings
from streams.text import parse_whole

if TYPE_CHECKING:
    from projections.projector import Projector
    from projections.prune_schedule import PruneSchedule


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    projector = subparsers.add_parser(
        "projector", help="run the projector: every event topic into the PostgreSQL read model"
    )
    projector.add_argument(
        "--batch-size", type=int, default=10_000, help="most messages per transaction"
    )
    projector.add_argument(
        "--share",
        type=_share,
        default=None,
        metavar="K/N",
        help="project only the partitions whose number is K modulo N; run N projectors "
        "(0/N to N-1/N) to share the work (default: every partition)",
    )
    add_prune_every_option(projector)
    add_health_option(projector)
    projector.set_defaults(func=cmd_projector)

    projections = subparsers.add_parser("projections", help="the PostgreSQL read model")
    psub = projections.add_subparsers(dest="projections_command", metavar="ACTION", required=True)
    rb = psub.add_parser(
        "rebuild",
        help="replay every topic into a fresh schema and swap it in (--verify: compare only)",
    )
    rb.add_argument(
        "--verify",
        action="store_true",
        help="rebuild up to the live offsets, print every difference from the live tables, "
        "exit 1 if any; the live tables stay as they are",
    )
    rb.add_argument(
        "--workers",
        type=_workers,
        default=None,
        help="processes that load the topics (default: one per core, up to 8, and one "
        "below 50,000 messages)",
    )
    rb.add_argument(
        "--swap-wait",
        type=positive_wait_seconds,
        default=None,
        metavar="S",
        help="how long to keep trying to swap in while other sessions hold the live tables, "
        "each try making readers wait at most a second (default 300)",
    )
    rb.add_argument(
        "--drop-history",
        action="store_true",
        help="swap in even when the live tables hold records the topics no longer hold "
        "(retention or compaction removed them): they are dropped. Without it such a "
        "rebuild refuses and changes nothing",
    )
    rb.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    rb.set_defaults(func=cmd_rebuild)
    check = psub.add_parser(
        "check",
        help="whether the projector can resume the read model from the topics as they are: "
        f"exit 0 if so, {MUST_REBUILD} if they were recreated since (rebuild it), 1 if it "
        "cannot tell",
    )
    check.add_argument(
        "--wait",
        type=positive_wait_seconds,
        default=30.0,
        metavar="SECONDS",
        help="how long to wait for PostgreSQL (default 30)",
    )
    check.set_defaults(func=cmd_check)
    add_prune(psub)


MUST_REBUILD = 3
"""``projections check``'s exit code for a read model projected from topics that were deleted
and created again since (or whose Kafka data was reset): only a rebuild can resume it."""


def projector_probes(projector: Projector, schedule: PruneSchedule | None = None) -> LoopProbes:
    """The projector's ``/healthz`` (:meth:`Projector.alive`) and ``/readyz`` (connected to
    PostgreSQL), with its counts and its prune schedule's (``prune``: ``null`` without one)."""

    def details() -> dict[str, object]:
        stats = projector.stats
        return {
            "share": None if projector.share is None else str(projector.share),
            "waiting_for_postgresql": projector.waiting_for_postgresql,
            "loop_seconds_ago": round(time.monotonic() - projector.came_round_at, 3),
            "stalled_after_seconds": projector.STALLED_AFTER_S,
            "messages": stats.messages,
            "parked": stats.parked,
            "reconnects": stats.reconnects,
            "reseeks": stats.reseeks,
            "stalled_shares": projector.siblings.labels() if projector.siblings else [],
            "prune": None if schedule is None else schedule.details(),
        }

    def page() -> str:
        return instance_metrics.render_projector(
            "all" if projector.share is None else str(projector.share),
            projector.stats,
            projector.lag,
            ready=projector.connected,
            healthy=projector.alive(time.monotonic()),
            loop_seconds_ago=time.monotonic() - projector.came_round_at,
        )

    return LoopProbes(
        alive=lambda: projector.alive(time.monotonic()),
        ready=lambda: projector.connected,
        details=details,
        page=page,
    )


def _share(text: str) -> Share:
    try:
        return Share.parse(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


WORKERS_ALLOWED = 64
"""The most ``--workers`` a rebuild starts: each is a process with its own Kafka consumer and
PostgreSQL connection (PostgreSQL allows 100 by default), and a share holds one partition
number at the least, so a typo of 800 for 8 is refused rather than started."""


def _workers(text: str) -> int:
    value = parse_whole(text.strip(), WORKERS_ALLOWED)
    if not value:
        raise argparse.ArgumentTypeError(
            f"not a number of processes (1 to {WORKERS_ALLOWED}): {text!r}"
        )
    return value


def cmd_projector(args: argparse.Namespace) -> int:
    from sluicegate import bootstrap

    component = "projector" if args.share is None else f"projector:{args.share}"
    settings = start_logging(component)
    log = logging.getLogger("sluicegate.projector")
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("signal %d: finishing the current batch and stopping", signum)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    started = time.monotonic()
    if args.share is not None:
        log.info(
            "projecting share %s: the partitions whose number is %d modulo %d",
            args.share,
            args.share.index,
            args.share.count,
        )
    with bootstrap.projector(
        settings, batch_size=args.batch_size, stop=stop, share=args.share
    ) as projector:
        heart = Heartbeat.from_environment()  # under `sluicegate serve`
        if heart is not None:
            heart.keep_beating(lambda: projector.alive(time.monotonic()), stop)
        schedule = prune_schedule(settings, args.prune_every, args.share, args.prune_keep)
        probes = serve_probes(projector_probes(projector, schedule), args.health)
        try:
            projector.run()
        finally:
            if schedule is not None:
                schedule.close()
            if probes is not None:
                probes.close()
            stats = projector.stats
            elapsed = max(time.monotonic() - started, 1e-9)
            log.info(
                "stopped: %d messages in %d batches (%.0f/s), %d parked, %d reconnects",
                stats.messages,
                stats.batches,
                stats.messages / elapsed,
                stats.parked,
                stats.reconnects,
            )
    return 0


def cmd_rebuild(args: argparse.Namespace) -> int:
    from projections.rebuild import rebuild

    settings = start_logging("rebuild")
    logging.getLogger("sluicegate.projector").setLevel(logging.WARNING)
    result = rebuild(
        settings,
        verify=args.verify,
        show_progress=not args.no_progress,
        workers=args.workers,
        swap_wait_s=args.swap_wait,
        drop_history=args.drop_history,
    )
    if args.verify:
        for difference in result.differences:
            print(difference.describe())
        if result.differences:
            print(
                f"verify: {len(result.differences)} difference(s) between the live projection "
                f"and a rebuild from the topics ({result.messages} messages)",
                file=sys.stderr,
            )
            return 1
        print(
            f"verify: no differences ({result.messages} messages rebuilt in "
            f"{result.seconds:.1f} s)",
            file=sys.stderr,
        )
        return 0
    print(
        f"rebuilt {result.schema} from {result.messages} messages in {result.seconds:.1f} s "
        "and swapped it in",
        file=sys.stderr,
    )
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from projections.db import describe_dsn
    from projections.errors import ProjectionError, TopicRecreated
    from sluicegate import bootstrap

    settings = load_settings()
    stop = threading.Event()
    give_up = threading.Timer(args.wait, stop.set)  # PostgreSQL is waited for until then
    give_up.daemon = True
    give_up.start()
    try:
        with bootstrap.projector(settings, batch_size=1, stop=stop) as projector:
            stored = projector.check()
            schema = projector.schema
    except TopicRecreated as e:
        print(f"sluicegate projections check: {e}", file=sys.stderr)
        return MUST_REBUILD
    except ProjectionError:
        if not stop.is_set():
            raise
        print(
            f"sluicegate projections check: PostgreSQL at {describe_dsn(settings.pg_dsn)} "
            f"did not answer within {args.wait:g} s",
            file=sys.stderr,
        )
        return 1
    finally:
        give_up.cancel()
    print(
        f"projections check: the read model in schema {schema} resumes from the topics as they "
        f"are ({len(stored)} stored offsets)",
        file=sys.stderr,
    )
    return 0
