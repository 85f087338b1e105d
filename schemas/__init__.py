"""Sluicegate's data contract: record dataclasses, their Avro schemas and the wire codec.

``encode``/``decode`` are the only way records go onto and come off Kafka; see
:mod:`schemas.codec` for the guarantees and :mod:`schemas.errors` for what can go wrong.
"""

from schemas.codec import Record, decode, encode, from_json_dict, record_name, to_json_dict
from schemas.errors import (
    CorruptMessage,
    InvalidRecord,
    NotSingleObjectEncoded,
    SchemaError,
    SchemaMismatch,
    UnknownFingerprint,
)

__all__ = [
    "CorruptMessage",
    "InvalidRecord",
    "NotSingleObjectEncoded",
    "Record",
    "SchemaError",
    "SchemaMismatch",
    "UnknownFingerprint",
    "decode",
    "encode",
    "from_json_dict",
    "record_name",
    "to_json_dict",
]
