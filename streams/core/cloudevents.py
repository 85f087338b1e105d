"""CloudEvents 1.0 envelopes: the checks of the spec, below every front door's intake.

Pure: the webhook (structured, batched and binary HTTP modes) and ``sluicegate publish``
(JSON lines with a ``specversion``) hand what they received to :func:`read_event`,
:func:`read_batch` or :func:`binary_event` and get back a :class:`CloudEvent` (the event
in its JSON format: attributes and ``data`` or ``data_base64`` as members of one object) or
a :class:`~streams.core.errors.Refusal` with reason ``invalid_cloudevent`` whose problems
name each attribute and what is wrong with it. Nothing invalid is ever admitted.

Checked (CloudEvents 1.0.2 core spec, JSON event format, HTTP protocol binding):

- ``id``, ``source``, ``specversion`` and ``type`` are present, strings, non-empty;
  ``specversion`` is ``1.0``; ``source`` is a URI-reference (RFC 3986 characters only);
- ``time``, when present, is an RFC 3339 timestamp with an offset; ``dataschema`` a
  non-empty absolute URI; ``subject`` a non-empty string; ``datacontenttype`` a media type;
- every member other than ``data`` / ``data_base64`` is an attribute name (``a``-``z``,
  ``0``-``9``; at most :data:`MAX_NAME_CHARS`, the spec recommends 20) whose value is a
  string, a boolean or a 32-bit integer (JSON ``null`` is an absent attribute and is
  dropped); strings hold no control characters, noncharacters or lone surrogates;
- ``data`` and ``data_base64`` are never both present; ``data_base64`` is Base64; a ``data``
  whose ``datacontenttype`` is not JSON (``*/json``, ``*/*+json``) is a string.

In binary mode the ``ce-`` headers are the attributes (names case-insensitive, each given
once, values printable ASCII, double-quoted strings unescaped, then one round of
percent-decoding that must give UTF-8), ``Content-Type`` is ``datacontenttype`` (a
``ce-datacontenttype`` header is refused) and the body is the data: a JSON value for a JSON
media type, a string for ``text/*``, ``data_base64`` otherwise; an empty body is no data.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

import orjson

from streams.core.documents import DuplicateKey, TooDeep, parse_json_object
from streams.core.errors import FieldProblem, FieldRole, Refusal
from streams.core.reasons import REFUSE_INVALID_CLOUDEVENT

SPECVERSION = "1.0"
"""The one ``specversion`` accepted."""
REQUIRED = ("id", "source", "specversion", "type")
"""The attributes every CloudEvent has."""
DATA = "data"
DATA_BASE64 = "data_base64"
HEADER_PREFIX = "ce-"
MAX_NAME_CHARS = 64
MAX_BATCH_EVENTS = 100
"""The most events one batch may hold (each is answered; more is refused as a whole)."""
MAX_PROBLEMS = 16
"""Problems listed per event; an event wrong in more ways says how many were left out."""

_NAME = re.compile(rf"[a-z0-9]{{1,{MAX_NAME_CHARS}}}")
_INT32 = (-(2**31), 2**31 - 1)
# Characters RFC 3986 allows in a URI-reference; '%' must start a percent-encoded octet.
_URI_CHARS = re.compile(r"(?:[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})*")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
_TOKEN = r"[A-Za-z0-9!#$%&'*+.^_`|~\-]+"
_MEDIA_TYPE = re.compile(rf"{_TOKEN}/{_TOKEN}\s*(?:;.*)?", re.DOTALL)
_TIMESTAMP = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.[0-9]+)?"
    r"(?:[Zz]|[+-]([0-9]{2}):([0-9]{2}))"
)
_BAD_CHARS = re.compile(
    "[\x00-\x1f\x7f-\x9f\ud800-\udfff\ufdd0-\ufdef\ufffe\uffff"
    "\U0001fffe\U0001ffff\U0002fffe\U0002ffff\U0003fffe\U0003ffff\U0004fffe\U0004ffff"
    "\U0005fffe\U0005ffff\U0006fffe\U0006ffff\U0007fffe\U0007ffff\U0008fffe\U0008ffff"
    "\U0009fffe\U0009ffff\U000afffe\U000affff\U000bfffe\U000bffff\U000cfffe\U000cffff"
    "\U000dfffe\U000dffff\U000efffe\U000effff\U000ffffe\U000fffff\U0010fffe\U0010ffff]"
)
_PERCENT = re.compile(r"%([0-9A-Fa-f]{2})")


@dataclass(frozen=True)
class CloudEvent:
    """An event that passed every check of the spec, in its JSON format (``envelope``:
    attributes, and ``data`` or ``data_base64``; absent attributes are not members)."""

    envelope: dict[str, object]


def read_event(value: object) -> CloudEvent | Refusal:
    """Check one event in the JSON format (a parsed JSON value; module docstring)."""
    if not isinstance(value, dict):
        return _refusal([_problem("event", f"must be a JSON object, got {_json_type(value)}")])
    problems: list[FieldProblem] = []
    envelope: dict[str, object] = {}
    for name, member in value.items():
        if name in (DATA, DATA_BASE64):
            if member is not None or name == DATA:
                envelope[name] = member
            continue
        if not _NAME.fullmatch(name):
            problems.append(
                _problem(
                    _shown(name),
                    "is not a CloudEvents attribute name (lower-case letters a-z and digits "
                    f"0-9, at most {MAX_NAME_CHARS} characters)",
                )
            )
            continue
        if member is None:
            continue  # null: the attribute is unset (JSON format, 2.2)
        wrong = _attribute_problem(name, member)
        if wrong is not None:
            problems.append(_problem(name, wrong))
        envelope[name] = member
    for name in REQUIRED:
        if name not in envelope and not any(p.field == name for p in problems):
            problems.append(FieldProblem(name, FieldRole.ATTRIBUTE, "missing", missing=True))
    problems.extend(_data_problems(envelope))
    if problems:
        return _refusal(problems)
    return CloudEvent(envelope)


def read_batch(value: object) -> list[CloudEvent | Refusal] | Refusal:
    """Check a batch (JSON Batch format: an array of events, possibly empty): one answer per
    event, in order; a refusal of the whole when it is not an array or is too long."""
    if not isinstance(value, list):
        return _refusal([_problem("body", f"a batch is a JSON array, got {_json_type(value)}")])
    if len(value) > MAX_BATCH_EVENTS:
        return _refusal(
            [_problem("body", f"holds {len(value)} events; at most {MAX_BATCH_EVENTS} per batch")]
        )
    return [read_event(item) for item in value]


def binary_event(
    headers: Iterable[tuple[str, str]], content_type: str | None, body: bytes
) -> CloudEvent | Refusal:
    """The event of a binary-mode message: ``headers`` are its ``ce-*`` headers (name,
    value as received), ``content_type`` its ``Content-Type`` header (``None`` if absent)."""
    problems: list[FieldProblem] = []
    envelope: dict[str, object] = {}
    for header, raw in headers:
        name = header[len(HEADER_PREFIX) :].lower()
        if not _NAME.fullmatch(name) or name in (DATA, DATA_BASE64):
            problems.append(_problem(_shown(header), "is not a ce- header of an attribute name"))
            continue
        if name in envelope:
            problems.append(_problem(name, f"{HEADER_PREFIX}{name} is given more than once"))
            continue
        if name == "datacontenttype":
            problems.append(
                _problem(name, "send the data's media type as Content-Type, not ce-datacontenttype")
            )
            continue
        decoded = decode_header_value(raw)
        if decoded is None:
            problems.append(
                _problem(
                    name, "is not printable ASCII percent-encoding UTF-8 (HTTP binding 3.1.3.2)"
                )
            )
            continue
        envelope[name] = decoded
    if content_type is not None and content_type.strip():
        envelope["datacontenttype"] = content_type.strip()
    if body:
        media = content_type.split(";", 1)[0].strip().lower() if content_type else ""
        if _is_json(media):
            try:
                envelope[DATA] = parse_json_object(body)
            except orjson.JSONDecodeError as e:
                problems.append(_problem(DATA, f"is not the JSON its Content-Type says: {e}"))
            except (DuplicateKey, TooDeep) as e:
                problems.append(_problem(DATA, str(e)))
        elif media.startswith("text/"):
            try:
                envelope[DATA] = body.decode("utf-8")
            except UnicodeDecodeError:
                problems.append(_problem(DATA, "is not UTF-8 text"))
        else:
            envelope[DATA_BASE64] = base64.b64encode(body).decode("ascii")
    if problems:
        # The attributes that could be read are still checked, so every problem is named.
        checked = read_event(envelope)
        more = checked.problems if isinstance(checked, Refusal) else ()
        return _refusal(
            [*problems, *(p for p in more if p.field not in {q.field for q in problems})]
        )
    return read_event(envelope)


def decode_header_value(raw: str) -> str | None:
    """A ``ce-`` header value as the attribute's string: a double-quoted string unescaped
    (RFC 7230 3.2.6), then one round of percent-decoding that must give UTF-8; ``None`` if
    the value is not printable ASCII or not valid UTF-8 once decoded."""
    text = raw.strip(" \t")
    if not text.isascii() or any(not (" " <= c <= "~") and c != "\t" for c in text):
        return None
    if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        text = re.sub(r"\\(.)", r"\1", text[1:-1])
    if "%" not in text:
        return text
    try:
        return _PERCENT.sub(lambda m: chr(int(m.group(1), 16)), text).encode("latin-1").decode()
    except UnicodeDecodeError:
        return None


def is_event(payload: Mapping[str, object]) -> bool:
    """Whether a JSON object means to be a CloudEvent: it has a ``specversion`` member."""
    return "specversion" in payload


def _attribute_problem(name: str, value: object) -> str | None:
    if isinstance(value, bool):
        return None if name not in _STRING_ATTRIBUTES else "must be a string"
    if isinstance(value, int):
        if name in _STRING_ATTRIBUTES:
            return "must be a string"
        low, high = _INT32
        return None if low <= value <= high else "is an integer outside the 32-bit range"
    if not isinstance(value, str):
        return f"must be a string, a boolean or an integer, got {_json_type(value)}"
    bad = _BAD_CHARS.search(value)
    if bad is not None:
        return f"contains U+{ord(bad.group()):04X}, which a CloudEvents string may not hold"
    check = _STRING_ATTRIBUTES.get(name)
    return check(value) if check is not None else None


def _non_empty(value: str) -> str | None:
    return None if value else "must be a non-empty string"


def _specversion(value: str) -> str | None:
    if value == SPECVERSION:
        return None
    return f"must be {SPECVERSION} (this receiver takes CloudEvents {SPECVERSION} only)"


def _uri_reference(value: str) -> str | None:
    if not value:
        return "must be a non-empty URI-reference"
    if not _URI_CHARS.fullmatch(value):
        return "is not a URI-reference (RFC 3986: percent-encode other characters)"
    return None


def _uri(value: str) -> str | None:
    wrong = _uri_reference(value)
    if wrong is not None:
        return wrong.replace("URI-reference", "URI")
    return None if _SCHEME.match(value) else "must be an absolute URI (with a scheme)"


def _media_type(value: str) -> str | None:
    return None if _MEDIA_TYPE.fullmatch(value) else "is not a media type (RFC 2046: type/subtype)"


def _timestamp(value: str) -> str | None:
    """RFC 3339 ``date-time``: a calendar date, a time of day, an offset (``Z`` or +hh:mm)."""
    match = _TIMESTAMP.fullmatch(value)
    wrong = "is not an RFC 3339 timestamp (e.g. 2026-11-30T12:00:00Z)"
    if match is None:
        return wrong
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    try:
        datetime(year, month, day)
    except ValueError:
        return wrong
    # 60: a leap second, which RFC 3339 allows.
    if hour > 23 or minute > 59 or second > 60:
        return wrong
    if match.group(7) is not None and (int(match.group(7)) > 23 or int(match.group(8)) > 59):
        return wrong
    return None


_STRING_ATTRIBUTES = {
    "id": _non_empty,
    "source": _uri_reference,
    "specversion": _specversion,
    "type": _non_empty,
    "subject": _non_empty,
    "time": _timestamp,
    "dataschema": _uri,
    "datacontenttype": _media_type,
}


def _data_problems(envelope: dict[str, object]) -> list[FieldProblem]:
    if DATA_BASE64 not in envelope:
        if (
            DATA in envelope
            and not _declares_json(envelope)
            and not isinstance(envelope[DATA], str)
        ):
            return [_problem(DATA, "must be a string when datacontenttype is not JSON")]
        return []
    if DATA in envelope:
        return [_problem(DATA_BASE64, "data and data_base64 are mutually exclusive")]
    encoded = envelope[DATA_BASE64]
    if not isinstance(encoded, str):
        return [_problem(DATA_BASE64, "must be a Base64 string")]
    try:
        base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        return [_problem(DATA_BASE64, "is not Base64 (RFC 4648)")]
    return []


def _declares_json(envelope: Mapping[str, object]) -> bool:
    media = envelope.get("datacontenttype")
    if not isinstance(media, str):
        return True  # absent: application/json (JSON format, 3.1)
    return _is_json(media.split(";", 1)[0].strip().lower())


def _is_json(media: str) -> bool:
    subtype = media.partition("/")[2]
    return subtype == "json" or subtype.endswith("+json")


def _problem(field: str, message: str) -> FieldProblem:
    return FieldProblem(field, FieldRole.ATTRIBUTE, message)


def _shown(name: str) -> str:
    return name if len(name) <= MAX_NAME_CHARS else name[: MAX_NAME_CHARS - 1] + "…"


def _json_type(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return "null"


def _refusal(problems: list[FieldProblem]) -> Refusal:
    listed = problems[:MAX_PROBLEMS]
    detail = "; ".join(f"{p.field}: {p.message}" for p in listed)
    if len(problems) > MAX_PROBLEMS:
        left = len(problems) - MAX_PROBLEMS
        listed.append(_problem("event", f"{left} more problem(s) not listed"))
    return Refusal(
        REFUSE_INVALID_CLOUDEVENT,
        tuple(listed),
        f"not a valid CloudEvents {SPECVERSION} event: {detail}",
    )
