"""The wire codec: Avro single-object encoding of every Sluicegate record.

A message is ``C3 01`` + the 8-byte little-endian CRC-64-AVRO fingerprint of the schema it
was written with + the Avro binary body (no container file, no schema in the message).

Contract:

- :func:`encode` always writes with the *current* schema of the record's type.
- :func:`decode` reads a message written with the current schema or with any released
  version of it, resolves it to the current schema (fields the writer lacked get their
  defaults; fields the current schema dropped are skipped) and returns the current
  dataclass, with Avro arrays as tuples. ``decode(encode(r)) == r`` for every record ``r``.
- Every failure to read input is a typed :class:`~schemas.errors.SchemaError`; nothing is
  guessed, and a message is read whole (trailing bytes are an error).

Both directions run once per Kafka message, so they use only cached, pre-parsed schemas and
field lists from :mod:`schemas.registry`.
"""

from __future__ import annotations

from collections.abc import Mapping
from io import BytesIO
from typing import Any

from fastavro import schemaless_reader
from fastavro.read import SchemaResolutionError

from schemas.binary import Unfit, unfit_field
from schemas.binary_reader import Unread
from schemas.errors import (
    CorruptMessage,
    InvalidRecord,
    NotSingleObjectEncoded,
    SchemaMismatch,
    UnknownFingerprint,
)
from schemas.records import Record
from schemas.registry import (
    HEADER_LENGTH,
    MAGIC,
    RecordSchema,
    WriterSchema,
    get_registry,
)

__all__ = ["Record", "decode", "encode", "from_json_dict", "record_name", "to_json_dict"]

_AVRO_LONG_MIN = -(2**63)
_AVRO_LONG_MAX = 2**63 - 1


def _schema_of(record: object) -> RecordSchema:
    schema = get_registry().by_class.get(type(record))
    if schema is None:
        raise TypeError(
            f"{type(record).__qualname__} is not a Sluicegate record type; only the "
            "dataclasses in schemas.events and schemas.commands can be encoded"
        )
    return schema


def encode(record: object) -> bytes:
    """Encode ``record`` as an Avro single-object message with its current schema.

    ``record`` must be an instance of one of the dataclasses of :data:`Record` (exactly that
    class, not a subclass), else :class:`TypeError`. Raises
    :class:`~schemas.errors.InvalidRecord` when a field value does not fit its schema: a
    ``long`` that is not an ``int`` (``bool`` and ``float`` are refused rather than coerced)
    or is outside the signed 64-bit range, an array that is not a ``tuple`` (a ``str`` would
    otherwise be written as a list of characters), a non-``str`` text value, or text that is
    not valid UTF-8 (lone surrogates).
    """
    schema = _schema_of(record)
    try:
        return schema.write(record)
    except (Unfit, TypeError, ValueError, OverflowError, AttributeError):
        pass  # the checked path below names the field that does not fit
    return _encode_checked(schema, record)


def _encode_checked(schema: RecordSchema, record: object) -> bytes:
    values = schema.values(record)
    for i in schema.long_indices:
        value = values[i]
        if value is None and schema.field_kinds[i] == "optional_long":
            continue
        if type(value) is not int or not _AVRO_LONG_MIN <= value <= _AVRO_LONG_MAX:
            raise InvalidRecord(
                f"{schema.name}.{schema.field_names[i]} must be an int in the signed 64-bit "
                f"range (Avro long), got {value!r}"
            )
    for i in schema.tuple_indices:
        value = values[i]
        if type(value) is not tuple:
            raise InvalidRecord(
                f"{schema.name}.{schema.field_names[i]} must be a tuple of str, "
                f"got {type(value).__name__}"
            )
    try:
        return schema.header + schema.write_body(values)
    except (TypeError, ValueError, OverflowError, AttributeError) as e:
        # UnicodeEncodeError is a ValueError; a text field holding a non-str has no .encode.
        at = unfit_field(schema.field_kinds, values)
        name = schema.name if at is None else f"{schema.name}.{schema.field_names[at]}"
        raise InvalidRecord(f"{name} does not fit its schema: {e}") from e


def _writer_of(data: bytes) -> WriterSchema:
    if len(data) < HEADER_LENGTH or data[:2] != MAGIC:
        raise NotSingleObjectEncoded(
            f"not an Avro single-object message: {len(data)} bytes starting with "
            f"{bytes(data[:2]).hex() or '(nothing)'}; expected at least {HEADER_LENGTH} bytes "
            f"starting with {MAGIC.hex()}. The producer does not use the Sluicegate codec."
        )
    registry = get_registry()
    fingerprint = bytes(data[2:HEADER_LENGTH])
    writer = registry.writers.get(fingerprint)
    if writer is None:
        raise UnknownFingerprint(fingerprint, registry.known_versions)
    return writer


def decode(data: bytes) -> Record:
    """Decode a single-object message into the current dataclass of its record type.

    Raises :class:`~schemas.errors.NotSingleObjectEncoded` for a missing or short header,
    :class:`~schemas.errors.UnknownFingerprint` for a schema this build does not know,
    :class:`~schemas.errors.CorruptMessage` when the body does not decode with the named
    schema or has trailing bytes, and :class:`~schemas.errors.SchemaMismatch` when a
    released writer schema cannot be resolved to the current one (a build defect that
    ``tests/unit/test_schema_compat.py`` exists to catch).
    """
    writer = _writer_of(data)
    if writer.read is not None:
        try:
            fast: Record = writer.read(data)
            return fast
        except (Unread, IndexError, ValueError, TypeError, AttributeError):
            pass  # fastavro reads it, or says what is wrong with it
    return _decode_resolved(writer, data)


def _decode_resolved(writer: WriterSchema, data: bytes) -> Record:
    stream = BytesIO(data)
    stream.seek(HEADER_LENGTH)
    try:
        datum: Any = schemaless_reader(stream, writer.writer, writer.reader)
    except SchemaResolutionError as e:
        raise SchemaMismatch(
            f"message written with {writer.label} cannot be read as the current {writer.name}: {e}"
        ) from e
    except Exception as e:
        raise CorruptMessage(
            f"body of a message written with {writer.label} ({len(data)} bytes) does not "
            f"decode: {type(e).__name__}: {e}"
        ) from e
    if stream.tell() != len(data):
        raise CorruptMessage(
            f"message written with {writer.label} has {len(data) - stream.tell()} trailing "
            "bytes after its body"
        )
    for name in writer.tuple_fields:
        datum[name] = tuple(datum[name])
    record: Record = writer.cls(*writer.arguments(datum))
    return record


def record_name(data: bytes) -> str:
    """Return the record type name (e.g. ``"RunAdmitted"``) of a message from its header.

    Reads only the header: the body is not validated. Raises
    :class:`~schemas.errors.NotSingleObjectEncoded` or
    :class:`~schemas.errors.UnknownFingerprint` like :func:`decode`.
    """
    return _writer_of(data).name


def to_json_dict(record: object) -> dict[str, object]:
    """Return ``record`` as a JSON-ready dict: ``{"type": ClassName, field: value, ...}``.

    Fields appear in schema order after ``"type"``; tuples become lists; nothing else is
    converted (values are ``str``, ``int``, ``None`` or lists of ``str``). Raises
    :class:`TypeError` if ``record`` is not a record type instance.
    ``from_json_dict(d["type"], d)`` gives ``record`` back.
    """
    schema = _schema_of(record)
    result: dict[str, object] = {"type": schema.name}
    result.update(zip(schema.field_names, schema.values(record), strict=True))
    for name in schema.tuple_fields:
        value = result[name]
        if isinstance(value, tuple):
            result[name] = list(value)
    return result


def from_json_dict(name: str, data: Mapping[str, object]) -> Record:
    """Build the record type ``name`` from a dict such as :func:`to_json_dict` returns.

    Accepts lists or tuples for arrays. A ``"type"`` key, if present, must equal ``name``.
    A missing field takes the current schema's default when it has one (as Avro resolution
    would); a missing field without a default, an unknown key, a value of the wrong type or
    an unknown ``name`` raise :class:`~schemas.errors.InvalidRecord`.
    """
    schema = get_registry().by_name.get(name)
    if schema is None:
        raise InvalidRecord(f"unknown record type {name!r}")
    if "type" in data and data["type"] != name:
        raise InvalidRecord(f"dict says type {data['type']!r} but {name!r} was asked for")
    unknown = sorted(set(data) - set(schema.field_names) - {"type"})
    if unknown:
        raise InvalidRecord(f"{name} has no fields {unknown}")
    kwargs: dict[str, Any] = {}
    for field, kind in zip(schema.field_names, schema.field_kinds, strict=True):
        if field in data:
            value = data[field]
        elif field in schema.defaults:
            value = schema.defaults[field]
        else:
            raise InvalidRecord(f"{name}.{field} is missing and has no default")
        kwargs[field] = _checked(name, field, kind, value)
    record: Record = schema.cls(**kwargs)
    return record


def _checked(name: str, field: str, kind: str, value: object) -> object:
    if kind == "string" and isinstance(value, str):
        return value
    if kind == "optional_string" and (value is None or isinstance(value, str)):
        return value
    if kind == "optional_long" and value is None:
        return value
    if (
        kind in ("long", "optional_long")
        and isinstance(value, int)
        and not isinstance(value, bool)
        and _AVRO_LONG_MIN <= value <= _AVRO_LONG_MAX
    ):
        return value
    if (
        kind == "string_array"
        and isinstance(value, list | tuple)
        and all(isinstance(item, str) for item in value)
    ):
        return tuple(value)
    raise InvalidRecord(f"{name}.{field} must be {kind}, got {value!r}")
