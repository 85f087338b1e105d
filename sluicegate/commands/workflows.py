"""``sluicegate workflows apply|list``: publish workflow definitions, list the current ones."""

from __future__ import annotations

import argparse
import sys
import tomllib
from pathlib import Path

from schemas.codec import encode
from schemas.events import WorkflowRevised
from schemas.topics import WORKFLOWS
from sluicegate.errors import SluicegateError
from sluicegate.output import print_rows
from streams.adapters.workflow_table import WorkflowTable
from streams.clock import wall_clock_ms
from streams.core.errors import IdentityChanged, WorkflowFileError
from streams.core.workflow import parse_workflow_file, revise, workflow_key
from streams.kafka.clients import idempotent_producer
from streams.kafka.topics import ensure_topics
from streams.settings import load_settings
from streams.text import NotText, read_text_file


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    workflows = subparsers.add_parser("workflows", help="publish and list workflow definitions")
    wsub = workflows.add_subparsers(dest="workflows_command", metavar="ACTION", required=True)
    apply = wsub.add_parser(
        "apply", help="publish definitions from a TOML file (new revision only when changed)"
    )
    apply.add_argument("file", type=Path)
    apply.add_argument("--json", action="store_true", help="print JSON instead of a table")
    apply.set_defaults(func=cmd_workflows_apply)
    listing = wsub.add_parser("list", help="the current revision of every destination")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(func=cmd_workflows_list)


def cmd_workflows_apply(args: argparse.Namespace) -> int:
    settings = load_settings()
    try:
        document = tomllib.loads(read_text_file(args.file))
    except OSError as e:
        raise SluicegateError(f"cannot read {args.file}: {e.strerror}") from e
    except NotText as e:
        raise SluicegateError(str(e)) from None
    except tomllib.TOMLDecodeError as e:
        raise SluicegateError(f"{args.file} is not valid TOML: {e}") from e
    try:
        definitions = parse_workflow_file(document)
    except WorkflowFileError as e:
        for problem in e.problems:
            print(f"{args.file}: {problem}", file=sys.stderr)
        raise SluicegateError(
            f"{args.file} has {len(e.problems)} problem(s); nothing applied"
        ) from e

    ensure_topics(settings)
    table = WorkflowTable(settings)
    producer = idempotent_producer(settings)
    rows: list[dict[str, object]] = []
    try:
        table.catch_up()
        now = wall_clock_ms()
        # Every definition is revised before anything is produced: one refused identity
        # change applies nothing from the file.
        revisions: list[tuple[WorkflowRevised | None, WorkflowRevised | None]] = []
        refused: list[str] = []
        for index, definition in enumerate(definitions):
            current = table.get(definition.subscription, definition.environment)
            try:
                revisions.append((current, revise(current, definition, now)))
            except IdentityChanged as e:
                refused.append(f"{args.file}: workflow[{index}]: {e}")
        if refused:
            for problem in refused:
                print(problem, file=sys.stderr)
            raise SluicegateError(
                f"{args.file}: {len(refused)} destination(s) would change their occurrence "
                "identity; nothing applied"
            )
        for definition, (current, revised) in zip(definitions, revisions, strict=True):
            if revised is not None:
                producer.produce(
                    settings.topic(WORKFLOWS),
                    key=workflow_key(revised.subscription, revised.environment).encode(),
                    value=encode(revised),
                )
            rows.append(
                {
                    "subscription": definition.subscription,
                    "environment": definition.environment,
                    "revision": revised.revision
                    if revised
                    else (current.revision if current else 0),
                    "change": "new revision" if revised else "unchanged",
                }
            )
        if producer.flush(30):
            raise SluicegateError("Kafka did not acknowledge the workflow revisions; run it again")
    finally:
        table.close()
    print_rows(rows, args.json)
    return 0


def cmd_workflows_list(args: argparse.Namespace) -> int:
    settings = load_settings()
    table = WorkflowTable(settings)
    try:
        table.catch_up()
        rows: list[dict[str, object]] = [
            {
                "subscription": w.subscription,
                "environment": w.environment,
                "revision": w.revision,
                "slots": ",".join(w.slots),
                "window_ms": w.validity_window_ms,
                "retention_ms": w.retention_ms,
            }
            for w in table.all()
        ]
    finally:
        table.close()
    print_rows(rows, args.json)
    return 0
