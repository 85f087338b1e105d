"""Each ``schemas/avro/<ClassName>.avsc`` mirrors its dataclass 1:1, and vice versa.

The expected Avro types are written out here independently of ``schemas.registry`` so that
a bug in the registry's own mirror check cannot hide a drifted schema. The second half
checks that the registry refuses to load schemas that drift.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import typing
from pathlib import Path
from typing import Any

import pytest

from schemas.errors import SchemaMismatch
from schemas.files import AVRO_DIR, RELEASED_DIR
from schemas.registry import Registry
from tests.unit.test_schemas_roundtrip import ALL_CLASSES

EXPECTED_AVRO_TYPE: dict[object, object] = {
    str: "string",
    int: "long",
    str | None: ["null", "string"],
    int | None: ["null", "long"],
    tuple[str, ...]: {"type": "array", "items": "string"},
}


def _avsc(cls: type[Any]) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((AVRO_DIR / f"{cls.__name__}.avsc").read_text())
    return document


def test_every_dataclass_has_an_avsc_and_every_avsc_a_dataclass() -> None:
    files = {p.stem for p in AVRO_DIR.glob("*.avsc")}
    classes = {c.__name__ for c in ALL_CLASSES}
    assert files == classes
    assert not [p for p in AVRO_DIR.iterdir() if p.suffix != ".avsc"]


def _fits(value: object, annotation: object) -> bool:
    if annotation is str:
        return isinstance(value, str)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


@pytest.mark.parametrize("cls", ALL_CLASSES, ids=lambda c: c.__name__)
def test_avsc_mirrors_dataclass(cls: type[Any]) -> None:
    schema = _avsc(cls)
    assert schema["type"] == "record"
    assert schema["name"] == cls.__name__
    assert schema["namespace"] == "sluicegate"
    assert isinstance(schema.get("doc"), str) and schema["doc"].strip()

    hints = typing.get_type_hints(cls)
    fields = dataclasses.fields(cls)
    assert [f["name"] for f in schema["fields"]] == [f.name for f in fields]
    for avro_field, field in zip(schema["fields"], fields, strict=True):
        where = f"{cls.__name__}.{field.name}"
        assert avro_field["type"] == EXPECTED_AVRO_TYPE[hints[field.name]], where
        optional = hints[field.name] in (str | None, int | None)
        if optional:
            assert "default" in avro_field and avro_field["default"] is None, where
        elif "default" in avro_field:
            # Allowed (a field added after release needs one for older writers) if it fits.
            assert _fits(avro_field["default"], hints[field.name]), where
        assert isinstance(avro_field.get("doc"), str) and avro_field["doc"].strip(), where
        assert set(avro_field) <= {"name", "type", "doc", "default"}, where


@pytest.mark.parametrize("cls", ALL_CLASSES, ids=lambda c: c.__name__)
def test_no_field_is_called_type(cls: type[Any]) -> None:
    # to_json_dict() adds a "type" key next to the fields.
    assert "type" not in {f.name for f in dataclasses.fields(cls)}


def test_registry_loads_the_real_schemas() -> None:
    registry = Registry.load()
    assert set(registry.by_class) == set(ALL_CLASSES)


def _copy_avro(tmp_path: Path) -> Path:
    avro = tmp_path / "avro"
    shutil.copytree(AVRO_DIR, avro)
    return avro


def _edit(avro: Path, name: str, edit: typing.Callable[[dict[str, Any]], None]) -> None:
    path = avro / f"{name}.avsc"
    schema = json.loads(path.read_text())
    edit(schema)
    path.write_text(json.dumps(schema))


def _swap_first_two(schema: dict[str, Any]) -> None:
    fields = schema["fields"]
    fields[0], fields[1] = fields[1], fields[0]


def _int_instead_of_long(schema: dict[str, Any]) -> None:
    next(f for f in schema["fields"] if f["type"] == "long")["type"] = "int"


def _drop_default(schema: dict[str, Any]) -> None:
    del next(f for f in schema["fields"] if "default" in f)["default"]


def _non_optional(schema: dict[str, Any]) -> None:
    field = next(f for f in schema["fields"] if "default" in f)
    field["type"] = "string"
    del field["default"]


def _rename_record(schema: dict[str, Any]) -> None:
    schema["name"] = "RunAdmittedX"


def _other_namespace(schema: dict[str, Any]) -> None:
    schema["namespace"] = "other"


def _extra_field(schema: dict[str, Any]) -> None:
    schema["fields"].append({"name": "extra", "type": "string", "doc": "x"})


@pytest.mark.parametrize(
    "edit",
    [
        _swap_first_two,
        _int_instead_of_long,
        _drop_default,
        _non_optional,
        _rename_record,
        _other_namespace,
        _extra_field,
    ],
)
def test_registry_refuses_a_drifted_avsc(
    tmp_path: Path, edit: typing.Callable[[dict[str, Any]], None]
) -> None:
    avro = _copy_avro(tmp_path)
    _edit(avro, "RunAdmitted", edit)
    with pytest.raises(SchemaMismatch, match="RunAdmitted"):
        Registry.load(avro, RELEASED_DIR)


def test_registry_refuses_missing_and_extra_files(tmp_path: Path) -> None:
    avro = _copy_avro(tmp_path)
    (avro / "BranchStarted.avsc").unlink()
    with pytest.raises(SchemaMismatch, match="BranchStarted"):
        Registry.load(avro, RELEASED_DIR)
    shutil.copy(AVRO_DIR / "BranchStarted.avsc", avro / "BranchStarted.avsc")
    shutil.copy(AVRO_DIR / "BranchStarted.avsc", avro / "BranchBegun.avsc")
    with pytest.raises(SchemaMismatch, match="BranchBegun"):
        Registry.load(avro, RELEASED_DIR)


def test_registry_refuses_invalid_json(tmp_path: Path) -> None:
    avro = _copy_avro(tmp_path)
    (avro / "RunAdmitted.avsc").write_text("{not json")
    with pytest.raises(SchemaMismatch, match=r"RunAdmitted\.avsc"):
        Registry.load(avro, RELEASED_DIR)
