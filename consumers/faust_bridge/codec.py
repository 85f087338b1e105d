"""The ``"sluicegate"`` Faust codec: Sluicegate's records as their event dataclasses."""

from __future__ import annotations

from typing import Any

from faust.serializers import codecs

from schemas.codec import decode, encode

CODEC_NAME = "sluicegate"


class SluicegateCodec(codecs.Codec):
    """Avro single-object encoding, as every Sluicegate topic carries it.

    ``loads`` resolves the writer schema by the fingerprint in the header, so a record written
    with any released schema version decodes into the current dataclass (fields added later
    take their defaults). Bytes that are not a Sluicegate record raise the schema errors of
    :func:`schemas.codec.decode`; Faust then logs the offset and skips the message, so one
    hostile record never stops an agent.
    """

    def _loads(self, s: bytes) -> Any:
        return decode(s)

    def _dumps(self, s: Any) -> bytes:
        return encode(s)


def register() -> None:
    """Make ``value_serializer="sluicegate"`` resolvable (idempotent)."""
    codecs.register(CODEC_NAME, SluicegateCodec())
