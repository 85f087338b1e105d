"""Typed errors of the data contract.

Every error the codec raises on bad *input* is a :class:`SchemaError`, so a consumer can tell
"this message cannot be read by this build" apart from its own bugs with a single ``except``.
The subclasses say what went wrong and, in their message, what an operator should do.

Consumers must never drop a message that raises one of these silently: a poison message is
parked (dead-lettered) with the error text, because skipping it would lose a fact.
"""

from __future__ import annotations


class SchemaError(Exception):
    """Root of every data-contract error raised by :mod:`schemas`."""


class NotSingleObjectEncoded(SchemaError):
    """The bytes are not an Avro single-object encoded message.

    Raised when the payload is shorter than the 10-byte header (``C3 01`` marker plus the
    8-byte schema fingerprint) or does not start with ``C3 01``. The message was produced by
    something that does not use this codec (wrong topic, raw JSON, a tombstone); find the
    producer rather than retrying.
    """


class UnknownFingerprint(SchemaError):
    """The header names a schema this build does not know.

    Carries the fingerprint as it appears on the wire (8 bytes, little-endian, hex). Either
    the message was written by a newer build whose schema version this one has not got
    (upgrade this consumer to a build that ships that version), or by a build whose schema
    was never released (``scripts/release_schemas.py`` was not run before deploying it).
    """

    def __init__(self, fingerprint: bytes, known: str) -> None:
        self.fingerprint = fingerprint
        super().__init__(
            f"unknown schema fingerprint {fingerprint.hex()} (wire bytes, little-endian "
            f"CRC-64-AVRO); this build knows {known}. The writer used a schema version this "
            "build does not have: upgrade this consumer to a build that includes it, or "
            "release the writer's schema (scripts/release_schemas.py) if it never was."
        )


class CorruptMessage(SchemaError):
    """The header is valid and the schema known, but the body does not decode with it.

    The bytes were damaged or truncated in transit or at rest, or were written with a schema
    other than the one the header names. The original decoding error is the ``__cause__``.
    Park the message with this text; do not retry it.
    """


class SchemaMismatch(SchemaError):
    """The schema set is inconsistent with the code.

    Raised when a ``schemas/avro/*.avsc`` does not mirror its dataclass 1:1 (names, order,
    types, optionality), when a dataclass has no ``.avsc`` or an ``.avsc`` has no dataclass,
    when a released version is malformed, or when a message written with a released version
    cannot be resolved to the current schema. This is a build defect, not bad data: fix the
    ``.avsc`` or the dataclass (new fields need defaults) and rebuild.
    """


class InvalidRecord(SchemaError, ValueError):
    """A record or a JSON dict does not fit its record type.

    Raised by ``encode`` when a field value does not fit its schema (a float or bool where a
    long is required, a ``str`` where a tuple is required, an out-of-range long, text that is
    not encodable as UTF-8) and by ``from_json_dict`` for unknown names, unknown or missing
    keys and wrongly typed values. The caller built a bad value; nothing was written.
    """
