"""``sluicegate gate``: one instance of the supersession gate (its own component)."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import time

from sluicegate import bootstrap
from streams.settings import load_settings


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    command = subparsers.add_parser(
        "gate", help="run one supersession gate instance (decides candidates and dispatches)"
    )
    command.add_argument(
        "--instance-id",
        default=None,
        help="stable id of this instance (default $SLUICEGATE_GATE_INSTANCE_ID or gate-1); "
        "reuse it on restart, never run two live instances with one id",
    )
    command.add_argument(
        "--batch-size", type=int, default=2000, help="most records in one transaction"
    )
    command.add_argument(
        "--commit-interval-ms",
        type=int,
        default=100,
        help="target time of one transaction; batches are sized to commit about this often",
    )
    command.set_defaults(func=cmd_gate)


def cmd_gate(args: argparse.Namespace) -> int:
    settings = load_settings()
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    instance_id = args.instance_id or os.environ.get("SLUICEGATE_GATE_INSTANCE_ID", "gate-1")
    processor = bootstrap.gate_processor(
        settings,
        instance_id=instance_id,
        batch_size=args.batch_size,
        commit_interval_ms=args.commit_interval_ms,
    )

    def stop(_signum: int, _frame: object) -> None:
        processor.stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    started = time.monotonic()
    try:
        processor.run()
    finally:
        stats = processor.stats
        logging.getLogger("sluicegate.gate").info(
            "records=%d events=%d batches=%d aborts=%d restored=%d in %.1f s",
            stats.records,
            stats.events,
            stats.batches,
            stats.aborts,
            stats.restored_records,
            time.monotonic() - started,
        )
    return 0
