"""The schema files of this package: the current ``.avsc`` of each record type, every released
version and its fixture, and the wire fingerprint of a schema.

- ``schemas/avro/<ClassName>.avsc``: the current schema of each record type;
- ``schemas/released/<ClassName>/v<N>.avsc``: every version ever released (N >= 1), history
  that is never edited or deleted (``scripts/release_schemas.py`` adds new ones);
- ``schemas/fixtures/<ClassName>/v<N>.bin``: one message written with each released version.

Each schema is identified on the wire by the CRC-64-AVRO (Rabin) fingerprint of its Parsing
Canonical Form, as the Avro specification's "Schema Fingerprints" section defines it; the 8
fingerprint bytes are stored little-endian, as single-object encoding requires.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastavro import parse_schema
from fastavro.schema import fingerprint, to_parsing_canonical_form

from schemas.errors import SchemaMismatch
from schemas.mirror import NAMESPACE

PACKAGE_DIR = Path(__file__).resolve().parent
AVRO_DIR = PACKAGE_DIR / "avro"
RELEASED_DIR = PACKAGE_DIR / "released"
FIXTURES_DIR = PACKAGE_DIR / "fixtures"
FINGERPRINT_ALGORITHM = "CRC-64-AVRO"

_VERSION_FILE = re.compile(r"v([1-9][0-9]*)\.avsc")


@dataclass(frozen=True, slots=True)
class ReleasedVersion:
    """One released version of a record type's schema."""

    version: int
    path: Path
    raw: Mapping[str, Any]
    canonical_form: str
    fingerprint: bytes


def fingerprint_of(schema: Mapping[str, Any]) -> tuple[str, bytes]:
    """Return the Parsing Canonical Form of ``schema`` and its 8 wire fingerprint bytes.

    The bytes are the CRC-64-AVRO (Rabin) fingerprint in little-endian order, exactly as
    they follow ``C3 01`` in a single-object encoded message.
    """
    canonical = to_parsing_canonical_form(dict(schema))
    return canonical, bytes.fromhex(fingerprint(canonical, FINGERPRINT_ALGORITHM))


def load_json(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise SchemaMismatch(f"{path}: cannot read schema: {e}") from e
    if not isinstance(document, dict):
        raise SchemaMismatch(f"{path}: a schema file must hold one JSON object (a record)")
    return document


def parse(path: Path, raw: Mapping[str, Any]) -> Any:
    try:
        return parse_schema(dict(raw))
    except Exception as e:
        raise SchemaMismatch(f"{path}: not a valid Avro schema: {e}") from e


def load_released(
    name: str, released_dir: Path, current: Mapping[str, Any]
) -> tuple[ReleasedVersion, ...]:
    if not released_dir.is_dir():
        return ()
    versions: list[ReleasedVersion] = []
    for path in released_dir.iterdir():
        match = _VERSION_FILE.fullmatch(path.name)
        if match is None:
            raise SchemaMismatch(f"{path}: released schemas must be named v<N>.avsc (N >= 1)")
        raw = load_json(path)
        if raw.get("name") != name or raw.get("namespace") != NAMESPACE:
            raise SchemaMismatch(
                f"{path}: record must be {NAMESPACE}.{name}, got "
                f"{raw.get('namespace')}.{raw.get('name')}"
            )
        parse(path, raw)
        writer_fields = {f.get("name") for f in raw.get("fields", []) if isinstance(f, dict)}
        undefaulted = [
            f["name"]
            for f in current["fields"]
            if f["name"] not in writer_fields and "default" not in f
        ]
        if undefaulted:
            raise SchemaMismatch(
                f"{path}: the current {name}.avsc adds fields {undefaulted} without a "
                "default, so messages written with this released version cannot be read; "
                "give the new fields defaults"
            )
        canonical, fp = fingerprint_of(raw)
        versions.append(ReleasedVersion(int(match.group(1)), path, raw, canonical, fp))
    versions.sort(key=lambda v: v.version)
    return tuple(versions)
