"""``sluicegate workflows apply|list``, ``sluicegate publish`` and ``sluicegate processor``."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import time
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

import orjson

from schemas.codec import encode
from schemas.commands import AdmitDelivery
from schemas.events import WorkflowRevised
from schemas.topics import WORKFLOWS
from sluicegate.errors import SluicegateError
from sluicegate.output import print_table
from streams.adapters.deliveries import (
    ENVIRONMENTS,
    DeliveryProducer,
    DuplicateKey,
    TooDeep,
    build_delivery,
    new_delivery_id,
    parse_json_object,
)
from streams.adapters.workflow_table import WorkflowTable
from streams.apps.admission import AdmissionApp
from streams.core.admission import AdmissionEvent, Command, OccurrenceState
from streams.core.errors import DeliveryRefused, IdentityChanged, WorkflowFileError
from streams.core.refusals import bad_delivery_id
from streams.core.workflow import parse_workflow_file, revise, workflow_key
from streams.engine.processor import Processor, wall_clock_ms
from streams.kafka.clients import idempotent_producer
from streams.kafka.topics import ensure_topics
from streams.settings import Settings, load_settings


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

    publish = subparsers.add_parser(
        "publish", help="publish deliveries as JSON lines (from FILE, or stdin when no file)"
    )
    publish.add_argument("file", nargs="?", type=Path)
    publish.add_argument("--json", action="store_true", help="print one JSON line per delivery")
    publish.set_defaults(func=cmd_publish)

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


def cmd_workflows_apply(args: argparse.Namespace) -> int:
    settings = load_settings()
    try:
        document = tomllib.loads(args.file.read_text(encoding="utf-8"))
    except OSError as e:
        raise SluicegateError(f"cannot read {args.file}: {e.strerror}") from e
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
    _print(rows, args.json)
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
    _print(rows, args.json)
    return 0


def _print(rows: list[dict[str, object]], as_json: bool) -> None:
    if as_json:
        sys.stdout.write(orjson.dumps(rows).decode() + "\n")
    else:
        print_table(rows)


def cmd_publish(args: argparse.Namespace) -> int:
    settings = load_settings()
    if args.file is None:
        return _publish_lines(settings, sys.stdin, "stdin", args.json)
    try:
        with args.file.open(encoding="utf-8") as handle:
            return _publish_lines(settings, handle, str(args.file), args.json)
    except OSError as e:
        raise SluicegateError(f"cannot read {args.file}: {e.strerror}") from e


def _publish_lines(
    settings: Settings, lines: Iterable[str] | TextIO, name: str, as_json: bool
) -> int:
    table = WorkflowTable(settings)
    producer = DeliveryProducer(settings)
    published = 0
    problems = 0
    try:
        table.catch_up()
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                delivery = _delivery_from_line(table, line)
            except ValueError as e:
                problems += 1
                print(f"{name}:{number}: {e}", file=sys.stderr)
                continue
            producer.send(delivery)
            published += 1
            if as_json:
                sys.stdout.write(
                    orjson.dumps(
                        {
                            "line": number,
                            "delivery_id": delivery.delivery_id,
                            "admission_key": delivery.admission_key,
                        }
                    ).decode()
                    + "\n"
                )
        producer.flush()
    finally:
        table.close()
    print(
        f"published {published} deliveries; {problems} malformed line(s) skipped",
        file=sys.stderr,
    )
    return 1 if problems else 0


def _delivery_from_line(table: WorkflowTable, line: str) -> AdmitDelivery:
    """The ``AdmitDelivery`` for one JSON line; ``ValueError`` says why there is none.

    Refused, like the webhook refuses them: not a JSON object, a key given twice, an unknown
    destination, and whatever admission would reject for the payload alone (each problem
    named with its field and role, e.g. ``missing_identity_fields: decision-scope field
    account: missing``).
    """
    try:
        body = parse_json_object(line)
    except orjson.JSONDecodeError as e:
        raise ValueError(f"not JSON ({e})") from e
    except DuplicateKey as e:
        raise ValueError(
            f"{e.path}: given more than once (JSON parsers disagree on which value counts)"
        ) from e
    except TooDeep as e:
        raise ValueError(str(e)) from e
    if not isinstance(body, dict):
        raise ValueError("not a JSON object")
    subscription = body.pop("subscription", None)
    environment = body.pop("environment", None)
    delivery_id = body.pop("delivery_id", None) or new_delivery_id()
    if not isinstance(subscription, str) or not subscription:
        raise ValueError('missing "subscription"')
    if environment not in ENVIRONMENTS:
        raise ValueError(f'"environment" must be one of {", ".join(ENVIRONMENTS)}')
    if not isinstance(delivery_id, str):
        raise ValueError('"delivery_id" must be a string')
    bad_id = bad_delivery_id(delivery_id)
    if bad_id is not None:
        raise ValueError(bad_id)
    workflow = table.lookup(subscription, environment)
    if workflow is None:
        raise ValueError(
            f"unknown subscription {subscription}/{environment} "
            "(apply its workflow first: sluicegate workflows apply FILE)"
        )
    try:
        return build_delivery(
            workflow,
            body,
            delivery_id=delivery_id,
            received_at_ms=wall_clock_ms(),
            channel="publish",
        )
    except DeliveryRefused as e:
        problems = "; ".join(p.describe() for p in e.problems) or e.describe()
        raise ValueError(f"{e.reason}: {problems}") from e


def cmd_processor(args: argparse.Namespace) -> int:
    settings = load_settings()
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    instance_id = args.instance_id or os.environ.get("SLUICEGATE_INSTANCE_ID", "processor-1")
    ensure_topics(settings)
    table = WorkflowTable(settings)
    table.catch_up()
    processor: Processor[OccurrenceState, Command, AdmissionEvent] = Processor(
        settings,
        AdmissionApp(settings, table),
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
        table.close()
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
