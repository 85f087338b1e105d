"""The Faust codec reads every record type, in every released version, as its dataclass."""

from __future__ import annotations

from pathlib import Path

import pytest
from faust.serializers import codecs

from consumers.faust_bridge import CODEC_NAME, SluicegateCodec
from consumers.faust_bridge.codec import register
from schemas.codec import decode
from schemas.errors import SchemaError
from schemas.files import FIXTURES_DIR, RELEASED_DIR
from schemas.records import RECORD_CLASSES


def _fixtures() -> list[tuple[str, Path]]:
    return sorted(
        (d.name, FIXTURES_DIR / d.name / f"{p.stem}.bin")
        for d in RELEASED_DIR.iterdir()
        if d.is_dir()
        for p in d.glob("v*.avsc")
    )


FIXTURES = _fixtures()


def test_every_record_type_has_a_released_fixture_here() -> None:
    assert {name for name, _ in FIXTURES} == {c.__name__ for c in RECORD_CLASSES}


@pytest.mark.parametrize(("name", "fixture"), FIXTURES, ids=lambda v: getattr(v, "name", v))
def test_a_released_version_decodes_through_the_registered_codec(name: str, fixture: Path) -> None:
    register()
    data = fixture.read_bytes()
    record = codecs.loads(CODEC_NAME, data)
    assert type(record).__name__ == name
    assert record == decode(data)
    # Written back with the current schema, it reads the same.
    assert codecs.loads(CODEC_NAME, codecs.dumps(CODEC_NAME, record)) == record


@pytest.mark.parametrize(
    "hostile",
    [b"", b"{}", b"\xc3\x01" + b"\x00" * 8, b"\xc3\x01\xff\xff\xff\xff\xff\xff\xff\xffbody"],
)
def test_bytes_that_are_not_a_record_raise_the_schema_errors(hostile: bytes) -> None:
    with pytest.raises(SchemaError):
        SluicegateCodec().loads(hostile)
