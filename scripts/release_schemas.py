#!/usr/bin/env python3
"""Release every changed record schema: ``schemas/avro`` -> ``schemas/released``.

For each record type whose current ``schemas/avro/<ClassName>.avsc`` differs (by Parsing
Canonical Form, so doc-only edits do not count) from its newest released version, this
writes ``schemas/released/<ClassName>/v<N+1>.avsc`` (a byte copy of the current file) and a
fixture ``schemas/fixtures/<ClassName>/v<N+1>.bin``: one single-object message written with
that version's schema from a deterministic example. A released version that lacks its
fixture gets one written from its own schema. Released schemas and fixtures are never
modified or deleted.

Usage::

    python scripts/release_schemas.py          # release; prints what it released
    python scripts/release_schemas.py --check  # exit 1 if anything is unreleased

Run it (and commit its output) in the same change that edits an ``.avsc``: a build whose
current schema is unreleased writes messages that older consumers reject with
``UnknownFingerprint``, and ``tests/unit/test_schema_compat.py`` fails until it is run.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from fastavro import parse_schema, schemaless_writer  # noqa: E402

from schemas.files import FIXTURES_DIR, RELEASED_DIR, fingerprint_of  # noqa: E402
from schemas.registry import MAGIC, Registry  # noqa: E402


@dataclass(frozen=True)
class Pending:
    """One thing the tool would write."""

    name: str
    version: int
    schema_path: Path | None
    """The ``.avsc`` to copy into the release, or ``None`` if only the fixture is missing."""
    released_schema: Path
    fixture: Path

    def describe(self) -> str:
        if self.schema_path is None:
            return f"{self.name} v{self.version}: fixture missing ({self.fixture})"
        return f"{self.name} v{self.version}: {self.schema_path.name} is unreleased"


def example_value(avro_type: Any, field: str, index: int) -> Any:
    """Return a deterministic example value of ``avro_type`` for field ``field``.

    Optional fields get their non-null branch so that fixtures exercise the union; arrays
    get two items. Raises :class:`ValueError` for types no record uses yet.
    """
    if isinstance(avro_type, list):
        branches = [t for t in avro_type if t != "null"]
        return example_value(branches[0], field, index) if branches else None
    if isinstance(avro_type, dict):
        kind = avro_type.get("type")
        if kind == "array":
            return [example_value(avro_type["items"], f"{field}-{i}", index) for i in (1, 2)]
        if kind == "map":
            return {"key": example_value(avro_type["values"], field, index)}
        if kind == "enum":
            return avro_type["symbols"][0]
        return example_value(kind, field, index)
    if avro_type == "string":
        return f"{field}:example"
    if avro_type in ("long", "int"):
        return 1_700_000_000_000 + 1_000 * index if field.endswith("_ms") else index + 1
    if avro_type == "boolean":
        return True
    if avro_type in ("double", "float"):
        return 0.5
    if avro_type == "bytes":
        return field.encode()
    raise ValueError(f"no example for Avro type {avro_type!r} of field {field!r}")


def example_datum(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Return a deterministic example record (as a dict) for a record schema."""
    return {
        f["name"]: example_value(f["type"], f["name"], i) for i, f in enumerate(schema["fields"])
    }


def fixture_bytes(schema: Mapping[str, Any]) -> bytes:
    """Encode :func:`example_datum` of ``schema`` as a single-object message with ``schema``.

    Written with the given schema itself (not the current one), so that a fixture is
    exactly what a producer of that version put on the wire.
    """
    _, fp = fingerprint_of(schema)
    buffer = BytesIO()
    buffer.write(MAGIC + fp)
    schemaless_writer(buffer, parse_schema(dict(schema)), example_datum(schema))
    return buffer.getvalue()


def pending(
    registry: Registry, released_dir: Path = RELEASED_DIR, fixtures_dir: Path = FIXTURES_DIR
) -> list[Pending]:
    """List what is unreleased: changed current schemas and released versions' fixtures."""
    result: list[Pending] = []
    for record in sorted(registry.by_class.values(), key=lambda r: r.name):
        for version in record.released:
            fixture = fixtures_dir / record.name / f"v{version.version}.bin"
            if not fixture.exists():
                result.append(Pending(record.name, version.version, None, version.path, fixture))
        if record.version is None:
            newest = record.newest_released
            number = 1 if newest is None else newest.version + 1
            result.append(
                Pending(
                    record.name,
                    number,
                    record.path,
                    released_dir / record.name / f"v{number}.avsc",
                    fixtures_dir / record.name / f"v{number}.bin",
                )
            )
    return result


def release(items: Sequence[Pending]) -> None:
    """Write every pending release and fixture. Never overwrites an existing file."""
    for item in items:
        if item.schema_path is not None:
            item.released_schema.parent.mkdir(parents=True, exist_ok=True)
            with item.released_schema.open("xb") as out:
                out.write(item.schema_path.read_bytes())
        schema = json.loads(item.released_schema.read_text(encoding="utf-8"))
        item.fixture.parent.mkdir(parents=True, exist_ok=True)
        with item.fixture.open("xb") as out:
            out.write(fixture_bytes(schema))
        if item.schema_path is None:
            print(f"wrote missing fixture {item.name} v{item.version}: {item.fixture}")
        else:
            print(f"released {item.name} v{item.version}: {item.released_schema}, {item.fixture}")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the tool; returns the process exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if anything is unreleased; write nothing"
    )
    args = parser.parse_args(argv)
    items = pending(Registry.load())
    if args.check:
        for item in items:
            print(f"unreleased: {item.describe()}")
        if items:
            print("run scripts/release_schemas.py and commit its output", file=sys.stderr)
            return 1
        print("all schemas released")
        return 0
    if not items:
        print("nothing to release")
        return 0
    release(items)
    # Reload to prove the new files are consistent (raises SchemaMismatch otherwise).
    leftover = pending(Registry.load())
    if leftover:
        print(f"still unreleased after release: {[i.describe() for i in leftover]}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
