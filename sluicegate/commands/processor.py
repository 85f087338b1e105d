"""``sluicegate processor``: one instance of the exactly-once run admission processor."""

from __future__ import annotations

import argparse
import logging

from sluicegate import native
from sluicegate.commands import engine


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    processor = subparsers.add_parser("processor", help="run one processor instance")
    engine.add_instance_id(processor, default="processor-1", env_var="SLUICEGATE_INSTANCE_ID")
    engine.add_batch_options(processor)
    engine.add_health_option(processor)
    processor.set_defaults(func=cmd_processor)


def cmd_processor(args: argparse.Namespace) -> int:
    from sluicegate import bootstrap

    settings = engine.start_logging("processor")
    logging.getLogger("sluicegate.processor").info("admission core: %s", native.mode())
    running = bootstrap.admission_processor(
        settings,
        instance_id=engine.instance_id(
            args, default="processor-1", env_var="SLUICEGATE_INSTANCE_ID"
        ),
        batch_size=args.batch_size,
        commit_interval_ms=args.commit_interval_ms,
    )
    processor = running.processor
    try:
        return engine.run_until_signalled(
            processor,
            logging.getLogger("sluicegate.processor"),
            lambda seconds: engine.counts(processor.stats, seconds),
            args.health,
        )
    finally:
        running.workflows.close()
