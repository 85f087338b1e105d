"""The schema registry: every record type, its current schema and every released version.

The files are :mod:`schemas.files`' (current ``.avsc`` per record type, released versions);
each current schema must mirror its dataclass in :mod:`schemas.events` /
:mod:`schemas.commands` 1:1 (:mod:`schemas.mirror`). Messages name their schema by its
fingerprint (:func:`schemas.files.fingerprint_of`).

Guarantees once :func:`get_registry` has returned:

- every dataclass has a current schema that mirrors it, and every current schema has a
  dataclass (otherwise :class:`~schemas.errors.SchemaMismatch` was raised);
- every released version parses, is named after its directory, and names a default for each
  current field it lacks, so a message written with it can be read as the current dataclass;
- every current and released fingerprint maps to exactly one record type.

Loading happens once per process (lazily, thread-safe); the result is immutable.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schemas.binary import body_writer, record_writer
from schemas.binary_reader import record_reader
from schemas.errors import SchemaMismatch
from schemas.files import (
    AVRO_DIR,
    RELEASED_DIR,
    ReleasedVersion,
    fingerprint_of,
    load_json,
    load_released,
    parse,
)
from schemas.mirror import FieldKind, field_kinds_of, mirror_problems
from schemas.records import RECORD_CLASSES, Record

MAGIC = b"\xc3\x01"
HEADER_LENGTH = len(MAGIC) + 8


@dataclass(frozen=True, slots=True)
class RecordSchema:
    """A record type with its current schema and everything the codec caches for it."""

    cls: type[Record]
    name: str
    path: Path
    raw: Mapping[str, Any]
    parsed: Any
    canonical_form: str
    fingerprint: bytes
    header: bytes
    """``C3 01`` followed by the fingerprint: the prefix of every message this build writes."""
    field_names: tuple[str, ...]
    field_kinds: tuple[FieldKind, ...]
    values: Callable[[object], tuple[object, ...]]
    """Return the field values of an instance, in field order (no copying of tuples)."""
    write_body: Callable[[tuple[object, ...]], bytes]
    """The Avro body of those values (:mod:`schemas.binary`)."""
    write: Callable[[object], bytes]
    """The whole message of an instance; a value that does not fit raises
    :class:`~schemas.binary.Unfit` (:func:`schemas.binary.record_writer`)."""
    long_indices: tuple[int, ...]
    """Positions of the ``long`` fields in :attr:`field_names`."""
    tuple_indices: tuple[int, ...]
    """Positions of the ``array`` fields in :attr:`field_names`."""
    tuple_fields: tuple[str, ...]
    defaults: Mapping[str, object]
    """Avro defaults of the current schema, by field name (only fields that declare one)."""
    released: tuple[ReleasedVersion, ...]
    """Released versions, oldest first."""

    @property
    def newest_released(self) -> ReleasedVersion | None:
        """The newest released version, or ``None`` if the type was never released."""
        return self.released[-1] if self.released else None

    @property
    def version(self) -> int | None:
        """The released version number the current schema is, or ``None`` if unreleased."""
        newest = self.newest_released
        if newest is not None and newest.canonical_form == self.canonical_form:
            return newest.version
        return None


@dataclass(frozen=True, slots=True)
class WriterSchema:
    """What the codec needs to read a message written with one schema version."""

    cls: type[Record]
    name: str
    version: int | None
    """Released version number; ``None`` for a current schema that is not released yet."""
    writer: Any
    """The parsed writer schema."""
    reader: Any
    """The parsed current schema when it differs from the writer, else ``None``."""
    tuple_fields: tuple[str, ...]
    """Names of the current schema's array fields (decoded as lists, stored as tuples)."""
    arguments: Callable[[Mapping[str, Any]], tuple[Any, ...]]
    """Return the constructor arguments, in field order, from a decoded (reader-shaped) dict.

    Construction is positional: matching keywords against the decoder's freshly built
    (non-interned) key strings would cost about as much again as the constructor itself.
    """

    read: Callable[[bytes], Any] | None
    """The fast reader of a whole message (:func:`schemas.binary_reader.record_reader`) when
    this is the current schema, else ``None`` (an older version is resolved by fastavro)."""

    @property
    def label(self) -> str:
        """Human-readable version label such as ``RunAdmitted v2``."""
        if self.version is None:
            return f"{self.name} (current, unreleased)"
        return f"{self.name} v{self.version}"


class Registry:
    """Every record type with its current schema, and every writer schema by fingerprint.

    Build one with :meth:`load`; the process-wide instance is :func:`get_registry`.
    """

    def __init__(
        self,
        records: Mapping[type[Record], RecordSchema],
        writers: Mapping[bytes, WriterSchema],
    ) -> None:
        self.by_class: Mapping[type, RecordSchema] = dict(records)
        self.by_name: Mapping[str, RecordSchema] = {r.name: r for r in records.values()}
        self.writers: Mapping[bytes, WriterSchema] = dict(writers)
        self.known_versions: str = self._describe_versions()
        """Every known version, for error messages (``RunAdmitted v1/v2, ...``)."""

    def _describe_versions(self) -> str:
        parts: list[str] = []
        for record in sorted(self.by_class.values(), key=lambda r: r.name):
            versions = [f"v{v.version}" for v in record.released]
            if record.version is None:
                versions.append("unreleased current")
            parts.append(f"{record.name} {'/'.join(versions)}")
        return f"{len(self.writers)} schema versions ({', '.join(parts)})"

    @classmethod
    def load(
        cls,
        avro_dir: Path = AVRO_DIR,
        released_dir: Path = RELEASED_DIR,
        classes: tuple[type[Record], ...] = RECORD_CLASSES,
    ) -> Registry:
        """Load and check every current and released schema under the given directories.

        Raises :class:`SchemaMismatch` when a schema does not mirror its dataclass, a file
        is missing or extra, a released version is malformed or cannot be read as the
        current schema, or two record types share a fingerprint.
        """
        by_name = {c.__name__: c for c in classes}
        files = {p.stem: p for p in avro_dir.glob("*.avsc")}
        missing = sorted(set(by_name) - set(files))
        if missing:
            raise SchemaMismatch(f"no {avro_dir}/<ClassName>.avsc for dataclasses {missing}")
        extra = sorted(set(files) - set(by_name))
        if extra:
            raise SchemaMismatch(f"{avro_dir}: .avsc files without a dataclass: {extra}")
        if released_dir.is_dir():
            orphans = sorted(
                p.name for p in released_dir.iterdir() if p.is_dir() and p.name not in by_name
            )
            if orphans:
                raise SchemaMismatch(
                    f"{released_dir}: released versions of record types that no longer have "
                    f"a dataclass: {orphans}; messages of these types could not be read"
                )

        records: dict[type[Record], RecordSchema] = {}
        writers: dict[bytes, WriterSchema] = {}
        owner: dict[bytes, str] = {}
        for record_cls in classes:
            name = record_cls.__name__
            record = _load_record(record_cls, files[name], released_dir / name)
            records[record_cls] = record
            entries: list[tuple[int | None, bytes, Any]] = [
                (v.version, v.fingerprint, parse(v.path, v.raw)) for v in record.released
            ]
            if record.version is None:
                entries.append((None, record.fingerprint, record.parsed))
            arguments = _items_getter(record.field_names)
            read = record_reader(record_cls, HEADER_LENGTH, record.field_kinds)
            for version, fp, parsed in entries:
                if owner.get(fp, name) != name:
                    raise SchemaMismatch(
                        f"{name} and {owner[fp]} share the fingerprint {fp.hex()}; rename one"
                    )
                owner[fp] = name
                is_current = fp == record.fingerprint
                # Later (newer) versions with an identical canonical form overwrite earlier
                # ones, so the label names the newest release of that form.
                writers[fp] = WriterSchema(
                    cls=record_cls,
                    name=name,
                    version=version,
                    writer=record.parsed if is_current else parsed,
                    reader=None if is_current else record.parsed,
                    tuple_fields=record.tuple_fields,
                    arguments=arguments,
                    read=read if is_current else None,
                )
        return cls(records, writers)


def _load_record(record_cls: type[Record], path: Path, released_dir: Path) -> RecordSchema:
    name = record_cls.__name__
    raw = load_json(path)
    problems = mirror_problems(record_cls, raw)
    if problems:
        raise SchemaMismatch(
            f"{path} does not mirror {record_cls.__module__}.{name}:\n  " + "\n  ".join(problems)
        )
    parsed = parse(path, raw)
    canonical, fp = fingerprint_of(raw)
    kinds = field_kinds_of(record_cls)
    names = tuple(n for n, _ in kinds)
    defaults = {f["name"]: f["default"] for f in raw["fields"] if "default" in f}
    released = load_released(name, released_dir, raw)
    return RecordSchema(
        cls=record_cls,
        name=name,
        path=path,
        raw=raw,
        parsed=parsed,
        canonical_form=canonical,
        fingerprint=fp,
        header=MAGIC + fp,
        field_names=names,
        field_kinds=tuple(k for _, k in kinds),
        values=_values_getter(names),
        write_body=body_writer(tuple(k for _, k in kinds)),
        write=record_writer(MAGIC + fp, names, tuple(k for _, k in kinds)),
        long_indices=tuple(i for i, (_, k) in enumerate(kinds) if k in ("long", "optional_long")),
        tuple_indices=tuple(i for i, (_, k) in enumerate(kinds) if k == "string_array"),
        tuple_fields=tuple(n for n, k in kinds if k == "string_array"),
        defaults=defaults,
        released=released,
    )


def _values_getter(names: tuple[str, ...]) -> Callable[[object], tuple[object, ...]]:
    if len(names) == 1:
        (only,) = names
        return lambda instance: (getattr(instance, only),)
    getter: Callable[[object], tuple[object, ...]] = operator.attrgetter(*names)
    return getter


def _items_getter(names: tuple[str, ...]) -> Callable[[Mapping[str, Any]], tuple[Any, ...]]:
    if len(names) == 1:
        (only,) = names
        return lambda datum: (datum[only],)
    getter: Callable[[Mapping[str, Any]], tuple[Any, ...]] = operator.itemgetter(*names)
    return getter


_REGISTRY: Registry | None = None
_LOCK = threading.Lock()


def get_registry() -> Registry:
    """Return the process-wide registry, loading it from this package on first use.

    Raises :class:`SchemaMismatch` if the schema files are inconsistent; that is a build
    defect, so the process should refuse to start rather than retry.
    """
    registry = _REGISTRY
    if registry is None:
        registry = _load_once()
    return registry


def _load_once() -> Registry:
    global _REGISTRY  # noqa: PLW0603 - the lazily built process-wide instance
    with _LOCK:
        if _REGISTRY is None:
            _REGISTRY = Registry.load()
        return _REGISTRY
