"""``sluicegate publish [FILE]``: deliveries as JSON lines, the command-line front door.

Lines are read as bytes and decoded one by one, whatever the locale: a line that is not UTF-8
is skipped with its line and column, like any other malformed line, and the others are
published.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import orjson

from schemas.commands import AdmitDelivery
from sluicegate.errors import SluicegateError
from streams.adapters.deliveries import DeliveryProducer, new_delivery_id
from streams.adapters.workflow_table import WorkflowTable
from streams.clock import wall_clock_ms
from streams.core.cloudevents import CloudEvent, is_event, read_event
from streams.core.errors import Refusal
from streams.core.intake import DuplicateKey, TooDeep, intake, parse_json_object
from streams.core.refusals import bad_delivery_id
from streams.core.workflow import ENVIRONMENTS
from streams.settings import Settings, load_settings


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    publish = subparsers.add_parser(
        "publish", help="publish deliveries as JSON lines (from FILE, or stdin when no file)"
    )
    publish.add_argument("file", nargs="?", type=Path)
    publish.add_argument("--json", action="store_true", help="print one JSON line per delivery")
    publish.set_defaults(func=cmd_publish)


def cmd_publish(args: argparse.Namespace) -> int:
    settings = load_settings()
    if args.file is None:
        return _publish_lines(settings, sys.stdin.buffer, "stdin", args.json)
    try:
        with args.file.open("rb") as handle:
            return _publish_lines(settings, handle, str(args.file), args.json)
    except OSError as e:
        raise SluicegateError(f"cannot read {args.file}: {e.strerror}") from e


def _publish_lines(settings: Settings, lines: BinaryIO, name: str, as_json: bool) -> int:
    table = WorkflowTable(settings)
    producer = DeliveryProducer(settings)
    published = 0
    problems = 0
    try:
        table.catch_up()
        for number, raw in enumerate(_lines(lines), start=1):
            if isinstance(raw, bytes) and not raw.strip():
                continue
            try:
                delivery = _delivery_from_line(table, _decoded(raw))
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


MAX_LINE_BYTES = 1 << 20
"""The longest line ``publish`` reads, 1 MiB without its newline (a delivery's payload is at
most 64 KiB of canonical JSON); a longer one is skipped, never held in memory."""


def _lines(handle: BinaryIO) -> Iterator[bytes | int]:
    """Each line of ``handle``, or for a line longer than :data:`MAX_LINE_BYTES` its length.

    A file that is not JSON lines (a JSON array exported on one line, a binary file) was
    read a whole line at a time: 277 MB on one line made ``publish`` 1.8 GB resident before
    it said "not a JSON object". A line is now read at most 1 MiB at a time, and the rest of
    one that is longer is read past and counted.
    """
    while line := handle.readline(MAX_LINE_BYTES + 1):
        if len(line) <= MAX_LINE_BYTES or line.endswith(b"\n"):
            yield line
            continue
        size = len(line)
        while not line.endswith(b"\n") and (line := handle.readline(MAX_LINE_BYTES)):
            size += len(line)
        yield size - 1 if line.endswith(b"\n") else size  # the newline is not the line's


def _decoded(raw: bytes | int) -> str:
    """One line's text; ``ValueError`` naming the first byte that is not UTF-8, or the length
    of a line too long to be one delivery."""
    if isinstance(raw, int):
        raise ValueError(
            f"a line of {raw:,} bytes, longer than the {MAX_LINE_BYTES:,} a delivery line may "
            "have: publish reads JSON lines, one delivery object per line"
        )
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(
            f"not UTF-8 text: byte 0x{raw[e.start]:02x} at column {e.start + 1}"
        ) from None


def _delivery_from_line(table: WorkflowTable, line: str) -> AdmitDelivery:
    """The ``AdmitDelivery`` for one JSON line; ``ValueError`` says why there is none.

    The line is the delivery plus ``subscription``, ``environment`` and optionally
    ``delivery_id``; the rest goes through the intake every front door takes
    (:func:`streams.core.intake.intake`). Refused, like the webhook refuses them: not a JSON
    object, a key given twice, an unknown destination, and whatever admission would reject
    for the payload alone (each problem named with its field and role, e.g.
    ``missing_identity_fields: decision-scope field account: missing``).

    A line with a ``specversion`` member is a CloudEvent in the JSON format (``subscription``,
    ``environment`` and ``delivery_id`` are the destination, not attributes): it is checked
    against the spec (``invalid_cloudevent: CloudEvents attribute id: missing``) and taken
    only by a CloudEvents workflow, as the webhook takes one.
    """
    try:
        body = parse_json_object(line)
    except orjson.JSONDecodeError as e:
        raise ValueError(f"not JSON ({e})") from e
    except (DuplicateKey, TooDeep) as e:
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
    delivered: dict[str, object] | CloudEvent = body
    if is_event(body):
        checked = read_event(body)
        if isinstance(checked, Refusal):
            raise ValueError(f"{checked.reason}: {_problems(checked)}")
        delivered = checked
    now = wall_clock_ms()
    taken = intake(
        delivered,
        workflow,
        delivery_id=delivery_id,
        received_at_ms=now,
        channel="publish",
        now_ms=now,
    )
    if isinstance(taken, Refusal):
        raise ValueError(f"{taken.reason}: {_problems(taken)}")
    return taken


def _problems(refusal: Refusal) -> str:
    return "; ".join(p.describe() for p in refusal.problems) or refusal.detail
