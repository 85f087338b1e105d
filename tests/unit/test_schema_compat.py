"""Compatibility of the wire format across schema versions, and the codec's typed errors.

- every released version's fixture still decodes into the current dataclass;
- a message written with an older schema that lacks a field decodes with the default;
- nothing is unreleased (``scripts/release_schemas.py --check``);
- fingerprints are the Avro spec's CRC-64-AVRO, checked against an independent
  implementation of the spec's algorithm;
- bad input raises the documented :class:`~schemas.errors.SchemaError` subclass.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import typing
from dataclasses import dataclass, fields
from io import BytesIO
from pathlib import Path
from typing import Any

import pytest
from fastavro import parse_schema, schemaless_writer
from fastavro.schema import to_parsing_canonical_form
from hypothesis import given, settings
from hypothesis import strategies as st

import schemas.registry as registry_module
from schemas import (
    CorruptMessage,
    NotSingleObjectEncoded,
    Record,
    SchemaError,
    SchemaMismatch,
    UnknownFingerprint,
    decode,
    encode,
    record_name,
)
from schemas.events import AdmissionRecordEvicted, RunAdmitted
from schemas.files import AVRO_DIR, FIXTURES_DIR, RELEASED_DIR
from schemas.records import RECORD_CLASSES
from schemas.registry import Registry, get_registry

REPO_ROOT = Path(__file__).resolve().parents[2]
RELEASE_SCRIPT = REPO_ROOT / "scripts" / "release_schemas.py"

# --- CRC-64-AVRO exactly as the Avro specification's "Schema Fingerprints" section gives it.
_EMPTY64 = 0xC15D213AA4D7A795


def _rabin_table() -> list[int]:
    table = []
    for i in range(256):
        fp = i
        for _ in range(8):
            fp = (fp >> 1) ^ (_EMPTY64 & -(fp & 1))
        table.append(fp)
    return table


_TABLE = _rabin_table()


def spec_fingerprint(canonical_form: str) -> int:
    fp = _EMPTY64
    for byte in canonical_form.encode("utf-8"):
        fp = (fp >> 8) ^ _TABLE[(fp ^ byte) & 0xFF]
    return fp


def test_reference_fingerprint_matches_the_avro_test_vector() -> None:
    # share/test/data/schema-tests.txt in the Avro repository: "null" -> 7195948357588979594.
    assert spec_fingerprint('"null"') == 7195948357588979594


def test_canonical_form_of_a_small_record() -> None:
    schema = get_registry().by_class[AdmissionRecordEvicted]
    assert schema.canonical_form == (
        '{"name":"sluicegate.AdmissionRecordEvicted","type":"record","fields":['
        '{"name":"admission_key","type":"string"},'
        '{"name":"run_ids","type":{"type":"array","items":"string"}},'
        '{"name":"evicted_at_ms","type":"long"}]}'
    )


@pytest.mark.parametrize("cls", RECORD_CLASSES, ids=lambda c: c.__name__)
def test_header_carries_the_spec_fingerprint_little_endian(cls: type[Record]) -> None:
    schema = get_registry().by_class[cls]
    expected = spec_fingerprint(schema.canonical_form).to_bytes(8, "little")
    assert schema.fingerprint == expected
    assert schema.header == b"\xc3\x01" + expected


# --- released versions and their fixtures


def _released_versions() -> list[tuple[str, Path]]:
    return sorted(
        (d.name, p) for d in RELEASED_DIR.iterdir() if d.is_dir() for p in d.glob("v*.avsc")
    )


def test_every_record_type_is_released() -> None:
    released = {name for name, _ in _released_versions()}
    assert released == {c.__name__ for c in RECORD_CLASSES}


@pytest.mark.parametrize(
    ("name", "schema_path"), _released_versions(), ids=lambda v: getattr(v, "name", v)
)
def test_released_fixture_decodes_into_the_current_dataclass(name: str, schema_path: Path) -> None:
    fixture = FIXTURES_DIR / name / f"{schema_path.stem}.bin"
    assert fixture.exists(), f"{fixture} missing: run scripts/release_schemas.py"
    data = fixture.read_bytes()
    released = json.loads(schema_path.read_text())
    written_with = spec_fingerprint(to_parsing_canonical_form(released)).to_bytes(8, "little")
    assert data[:10] == b"\xc3\x01" + written_with, "fixture not written with its version"

    record = decode(data)
    assert type(record).__name__ == name
    assert record_name(data) == name
    # What the fixture says must survive a re-encode with the current schema.
    assert decode(encode(record)) == record
    # Fields present in that version keep their value (fixture values are never defaults).
    released_fields = {f["name"] for f in released["fields"]}
    for field in fields(record):
        if field.name in released_fields:
            assert getattr(record, field.name) is not None, field.name


def test_release_check_passes() -> None:
    result = subprocess.run(
        [sys.executable, str(RELEASE_SCRIPT), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


# --- an older writer


def _current_raw(name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((AVRO_DIR / f"{name}.avsc").read_text())
    return document


def _single_object(schema: dict[str, Any], datum: dict[str, Any]) -> bytes:
    fp = spec_fingerprint(to_parsing_canonical_form(schema)).to_bytes(8, "little")
    buffer = BytesIO()
    buffer.write(b"\xc3\x01" + fp)
    schemaless_writer(buffer, parse_schema(schema), datum)
    return buffer.getvalue()


def _registry_with_history(
    tmp_path: Path, name: str, history: list[dict[str, Any]], classes: Any = RECORD_CLASSES
) -> Registry:
    released = tmp_path / "released"
    shutil.copytree(RELEASED_DIR, released)
    shutil.rmtree(released / name)
    (released / name).mkdir()
    for number, schema in enumerate(history, start=1):
        (released / name / f"v{number}.avsc").write_text(json.dumps(schema))
    return Registry.load(AVRO_DIR, released, classes)


def _run_admitted_datum() -> dict[str, Any]:
    return {
        "run_id": "run-1",
        "admission_key": "sub/live/tv/evt-1",
        "delivery_id": "d-1",
        "subscription": "sub",
        "environment": "live",
        "workflow_revision": 3,
        "source": "tradingview",
        "event_id": "evt-1",
        "content_digest": "sha256:00",
        "source_time_ms": 1_700_000_000_000,
        "expires_at_ms": 1_700_000_060_000,
        "validity_source_time": "bar_close_time",
        "validity_window_ms": 60_000,
        "slots": ["analysis", "signal"],
        "scope_key": "acct/live/BTCUSDT/long",
        "sequence": "42",
        "payload_json": "{}",
        "rerun_number": 1,
        "rerun_of": "run-0",
        "rerun_reason": "operator asked",
        "admitted_at_ms": 1_700_000_000_500,
    }


def test_message_from_an_older_writer_gets_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    current = _current_raw("RunAdmitted")
    v1 = dict(current, fields=[f for f in current["fields"] if f["name"] != "rerun_reason"])
    registry = _registry_with_history(tmp_path, "RunAdmitted", [v1, current])
    monkeypatch.setattr(registry_module, "_REGISTRY", registry)

    datum = _run_admitted_datum()
    del datum["rerun_reason"]
    old_message = _single_object(v1, datum)
    assert old_message[2:10] != registry.by_class[RunAdmitted].fingerprint

    record = decode(old_message)
    assert isinstance(record, RunAdmitted)
    assert record.rerun_reason is None
    assert record.rerun_of == "run-0"
    assert record.slots == ("analysis", "signal")
    assert record_name(old_message) == "RunAdmitted"
    # Current messages still decode in the same registry.
    assert decode(encode(record)) == record


def test_field_dropped_since_an_older_writer_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    current = _current_raw("AdmissionRecordEvicted")
    extra = {"name": "partition", "type": "long", "doc": "dropped later"}
    v1 = dict(current, fields=[*current["fields"][:1], extra, *current["fields"][1:]])
    registry = _registry_with_history(tmp_path, "AdmissionRecordEvicted", [v1, current])
    monkeypatch.setattr(registry_module, "_REGISTRY", registry)

    message = _single_object(
        v1, {"admission_key": "k", "partition": 7, "run_ids": ["r"], "evicted_at_ms": 5}
    )
    assert decode(message) == AdmissionRecordEvicted("k", ("r",), 5)


def test_released_version_lacking_an_undefaulted_current_field_is_refused(
    tmp_path: Path,
) -> None:
    current = _current_raw("RunAdmitted")
    v1 = dict(current, fields=[f for f in current["fields"] if f["name"] != "admitted_at_ms"])
    with pytest.raises(SchemaMismatch, match="admitted_at_ms"):
        _registry_with_history(tmp_path, "RunAdmitted", [v1, current])


def test_released_version_with_an_incompatible_type_raises_schema_mismatch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    current = _current_raw("AdmissionRecordEvicted")
    v1 = json.loads(json.dumps(current))
    v1["fields"][2]["type"] = "string"  # evicted_at_ms was text in this imagined release
    registry = _registry_with_history(tmp_path, "AdmissionRecordEvicted", [v1, current])
    monkeypatch.setattr(registry_module, "_REGISTRY", registry)
    message = _single_object(v1, {"admission_key": "k", "run_ids": [], "evicted_at_ms": "5"})
    with pytest.raises(SchemaMismatch, match="AdmissionRecordEvicted v1"):
        decode(message)


# A next version of RunAdmitted, as a developer would write it: one new field with a default.
@dataclass(frozen=True)
class RunAdmittedNext:
    run_id: str
    admission_key: str
    delivery_id: str
    subscription: str
    environment: str
    workflow_revision: int
    source: str
    event_id: str | None
    content_digest: str
    source_time_ms: int
    expires_at_ms: int
    validity_source_time: str
    validity_window_ms: int
    slots: tuple[str, ...]
    scope_key: str | None
    sequence: str | None
    payload_json: str
    rerun_number: int
    rerun_of: str | None
    rerun_reason: str | None
    admitted_at_ms: int
    retention_ms: int | None = None
    branch_attempts: int = 3
    clock_uncertainty_ms: int = 250
    action_propose_slot: str | None = None
    action_approve_slots: tuple[str, ...] = ()
    action_exit_window_ms: int | None = None
    generation_kind: str | None = None
    channel: str = "unknown"


RunAdmittedNext.__name__ = RunAdmittedNext.__qualname__ = "RunAdmitted"


def test_release_tool_releases_a_changed_schema_and_old_fixtures_still_decode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = importlib.util.spec_from_file_location("release_schemas", RELEASE_SCRIPT)
    assert spec is not None and spec.loader is not None
    release_schemas = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "release_schemas", release_schemas)
    spec.loader.exec_module(release_schemas)

    avro, released, fixtures = tmp_path / "avro", tmp_path / "released", tmp_path / "fixtures"
    avro.mkdir()
    shutil.copytree(RELEASED_DIR / "RunAdmitted", released / "RunAdmitted")
    shutil.copytree(FIXTURES_DIR / "RunAdmitted", fixtures / "RunAdmitted")
    schema = _current_raw("RunAdmitted")
    schema["fields"].append(
        {"name": "channel", "type": "string", "default": "unknown", "doc": "Ingest channel."}
    )
    (avro / "RunAdmitted.avsc").write_text(json.dumps(schema, indent=2))
    classes = typing.cast("tuple[type[Record], ...]", (RunAdmittedNext,))

    registry = Registry.load(avro, released, classes)
    pending = release_schemas.pending(registry, released, fixtures)
    assert [(p.name, p.version) for p in pending] == [("RunAdmitted", 5)]
    release_schemas.release(pending)
    assert (released / "RunAdmitted" / "v5.avsc").read_bytes() == (
        avro / "RunAdmitted.avsc"
    ).read_bytes()

    registry = Registry.load(avro, released, classes)
    assert release_schemas.pending(registry, released, fixtures) == []
    assert registry.by_class[RunAdmittedNext].version == 5
    monkeypatch.setattr(registry_module, "_REGISTRY", registry)
    old = decode((fixtures / "RunAdmitted" / "v1.bin").read_bytes())
    new = decode((fixtures / "RunAdmitted" / "v5.bin").read_bytes())
    assert isinstance(old, RunAdmittedNext) and old.channel == "unknown"
    assert old.retention_ms is None
    assert (old.branch_attempts, old.clock_uncertainty_ms) == (3, 250)
    assert (old.action_propose_slot, old.action_approve_slots) == (None, ())
    assert isinstance(new, RunAdmittedNext) and new.channel == "channel:example"
    assert old.run_id == new.run_id == "run_id:example"


# --- typed errors


def _message() -> bytes:
    return encode(AdmissionRecordEvicted("key", ("run-1", "run-2"), 1_700_000_000_000))


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\xc3",
        b"\xc3\x01",
        b"\xc3\x01\x00\x00\x00\x00\x00\x00\x00",  # 9 bytes: header cut short
        b'{"run_id": "x", "admission_key": "y"}',
        b"\xc3\x02" + b"\x00" * 20,
        b"\x01\xc3" + b"\x00" * 20,
    ],
    ids=["empty", "one-byte", "magic-only", "nine-bytes", "json", "bad-version", "swapped"],
)
def test_not_single_object_encoded(data: bytes) -> None:
    with pytest.raises(NotSingleObjectEncoded):
        decode(data)
    with pytest.raises(NotSingleObjectEncoded):
        record_name(data)


def test_wrong_magic_on_a_real_message() -> None:
    message = _message()
    with pytest.raises(NotSingleObjectEncoded, match="c301"):
        decode(b"\xc3\x00" + message[2:])


def test_truncated_header_of_a_real_message() -> None:
    with pytest.raises(NotSingleObjectEncoded):
        decode(_message()[:9])


def test_unknown_fingerprint() -> None:
    message = _message()
    unknown = bytes(b ^ 0xFF for b in message[2:10])
    with pytest.raises(UnknownFingerprint) as caught:
        decode(message[:2] + unknown + message[10:])
    assert caught.value.fingerprint == unknown
    text = str(caught.value)
    assert unknown.hex() in text
    assert "upgrade" in text
    assert "AdmissionRecordEvicted v1" in text
    with pytest.raises(UnknownFingerprint):
        record_name(message[:2] + unknown)


@pytest.mark.parametrize(
    "damage",
    [
        lambda m: m[:-1],  # body truncated
        lambda m: m[:10],  # no body at all
        lambda m: m + b"\x00",  # trailing byte
        lambda m: m[:10] + b"\x06\xff\xfe\xfd" + m[14:],  # invalid UTF-8 in a string
        lambda m: m[:10] + b"\x01" + m[11:],  # negative string length
    ],
    ids=["truncated-body", "header-only", "trailing-byte", "bad-utf8", "negative-length"],
)
def test_corrupt_body(damage: typing.Callable[[bytes], bytes]) -> None:
    data = damage(_message())
    with pytest.raises(CorruptMessage) as caught:
        decode(data)
    if "trailing" not in str(caught.value):
        assert caught.value.__cause__ is not None
    assert record_name(data) == "AdmissionRecordEvicted"  # the header alone is fine


@settings(max_examples=300, deadline=None)
@given(cls=st.sampled_from(RECORD_CLASSES), body=st.binary(max_size=200))
def test_arbitrary_body_decodes_or_raises_corrupt_message(cls: type[Record], body: bytes) -> None:
    data = get_registry().by_class[cls].header + body
    try:
        record = decode(data)
    except CorruptMessage:
        return
    # Avro varints and array blocks have several encodings, so compare values, not bytes.
    assert type(record) is cls
    assert decode(encode(record)) == record


def test_every_error_is_a_schema_error() -> None:
    for error in (NotSingleObjectEncoded, UnknownFingerprint, CorruptMessage, SchemaMismatch):
        assert issubclass(error, SchemaError)
