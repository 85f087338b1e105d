"""``sluicegate gate``: one instance of the supersession gate (its own component)."""

from __future__ import annotations

import argparse
import logging

from sluicegate.commands import engine


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    command = subparsers.add_parser(
        "gate", help="run one supersession gate instance (decides candidates and dispatches)"
    )
    engine.add_instance_id(command, default="gate-1", env_var="SLUICEGATE_GATE_INSTANCE_ID")
    engine.add_batch_options(command)
    engine.add_health_option(command)
    command.set_defaults(func=cmd_gate)


def cmd_gate(args: argparse.Namespace) -> int:
    from sluicegate import bootstrap

    settings = engine.start_logging("gate")
    processor = bootstrap.gate_processor(
        settings,
        instance_id=engine.instance_id(
            args, default="gate-1", env_var="SLUICEGATE_GATE_INSTANCE_ID"
        ),
        batch_size=args.batch_size,
        commit_interval_ms=args.commit_interval_ms,
    )
    return engine.run_until_signalled(
        processor,
        logging.getLogger("sluicegate.gate"),
        lambda seconds: engine.counts(processor.stats, seconds),
        args.health,
    )
