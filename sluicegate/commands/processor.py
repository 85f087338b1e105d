"""``sluicegate processor``: one instance of the exactly-once run admission processor."""

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
    processor = subparsers.add_parser("processor", help="run one processor instance")
    processor.add_argument(
        "--instance-id",
        default=None,
        help="stable id of this instance (default $SLUICEGATE_INSTANCE_ID or processor-1); "
        "reuse it on restart, never run two live instances with one id",
    )
    processor.add_argument(
        "--batch-size", type=int, default=2000, help="most records in one transaction"
    )
    processor.add_argument(
        "--commit-interval-ms",
        type=int,
        default=100,
        help="target time of one transaction; batches are sized to commit about this often",
    )
    processor.set_defaults(func=cmd_processor)


def cmd_processor(args: argparse.Namespace) -> int:
    settings = load_settings()
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    instance_id = args.instance_id or os.environ.get("SLUICEGATE_INSTANCE_ID", "processor-1")
    running = bootstrap.admission_processor(
        settings,
        instance_id=instance_id,
        batch_size=args.batch_size,
        commit_interval_ms=args.commit_interval_ms,
    )
    processor = running.processor

    def stop(_signum: int, _frame: object) -> None:
        processor.stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    started = time.monotonic()
    try:
        processor.run()
    finally:
        running.workflows.close()
        stats = processor.stats
        logging.getLogger("sluicegate.processor").info(
            "records=%d events=%d batches=%d aborts=%d restored=%d in %.1f s",
            stats.records,
            stats.events,
            stats.batches,
            stats.aborts,
            stats.restored_records,
            time.monotonic() - started,
        )
    return 0
