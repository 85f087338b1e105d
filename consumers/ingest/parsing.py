"""Reading a webhook body into a payload (a flat JSON object's worth of fields).

Accepted, by ``Content-Type`` (UTF-8 only):

- ``application/json`` (and ``application/*+json``): a JSON object. Anything else — an array,
  a string, malformed JSON, an object that gives a key twice anywhere (JSON parsers disagree
  on which value counts; the problem names the key, e.g. ``price.limit``) — is refused.
- ``application/cloudevents+json`` (one CloudEvent), ``application/cloudevents-batch+json``
  (a JSON array of them), or any media type with ``ce-`` attribute headers (binary mode):
  read by :mod:`consumers.ingest.cloudevents`; other ``application/cloudevents*`` types are
  refused (415).
- ``text/plain``: what TradingView sends when the alert message is not valid JSON. If the
  text is a JSON object it is read as one (some senders label JSON as text); otherwise it is
  read as ``key=value`` pairs separated by newlines, commas, semicolons or whitespace, e.g.
  ``instrument={{ticker}} interval={{interval}} candle_open={{time}}``. A value with a
  separator in it is written in double quotes (``note="two words"``, with ``\\"`` and ``\\\\``
  escapes). Values of text bodies are strings; a key given twice is refused.

What happens next is every front door's intake (:func:`streams.core.intake.intake`): the
``token`` field removed, near-miss keys mapped to the workflow's field names, the identity
read. Nothing is renamed, dropped or converted here.

Every refusal is a :class:`~consumers.ingest.errors.RequestRefused` whose messages never
quote the body (it may hold a token).
"""

from __future__ import annotations

import re

import orjson

from consumers.ingest.errors import InvalidBody, Problem, UnsupportedMediaType
from streams.core.intake import REPEATED, DuplicateKey, TooDeep, parse_json_object

JSON = "json"
TEXT = "text"
STRUCTURED = "cloudevents-structured"
BATCH = "cloudevents-batch"
BINARY = "cloudevents-binary"
STRUCTURED_MEDIA_TYPE = "application/cloudevents+json"
BATCH_MEDIA_TYPE = "application/cloudevents-batch+json"

_UTF8_BOM = b"\xef\xbb\xbf"
_SEPARATORS = frozenset(" \t\r\n,;\f\v")
_KEY = re.compile(r"[^\s=,;\"]+")


def body_kind(content_type: str, charset: str | None, *, binary: bool = False) -> str:
    """``JSON`` or ``TEXT`` for an accepted media type, the CloudEvents modes
    (``STRUCTURED``, ``BATCH``; ``BINARY`` when the request has ``ce-`` attribute headers,
    whatever the data's media type), else :class:`UnsupportedMediaType`."""
    media = content_type.strip().lower()
    if charset is not None and charset.strip().lower() not in ("utf-8", "utf8", "us-ascii"):
        raise UnsupportedMediaType(
            "only UTF-8 bodies are accepted: send charset=utf-8 or no charset"
        )
    if media == STRUCTURED_MEDIA_TYPE:
        return STRUCTURED
    if media == BATCH_MEDIA_TYPE:
        return BATCH
    if media.startswith("application/cloudevents"):
        raise UnsupportedMediaType(
            f"CloudEvents are taken in the JSON event format only: {STRUCTURED_MEDIA_TYPE} "
            f"or {BATCH_MEDIA_TYPE}"
        )
    if binary:
        return BINARY
    if media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    ):
        return JSON
    if media == "text/plain":
        return TEXT
    raise UnsupportedMediaType(
        "send the body as Content-Type: application/json (a JSON object) or text/plain "
        "(a JSON object or key=value pairs)"
    )


def parse_body(raw: bytes, kind: str) -> dict[str, object]:
    """The payload of a body of ``kind``; :class:`InvalidBody` lists what is wrong."""
    if raw.startswith(_UTF8_BOM):
        raw = raw[len(_UTF8_BOM) :]
    if kind == JSON:
        return _json_object(raw)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidBody(
            "the body is not UTF-8 text", [Problem("body", "not valid UTF-8")]
        ) from None
    stripped = text.strip()
    if not stripped:
        raise InvalidBody("the body is empty", [Problem("body", "empty")])
    if stripped[0] in "{[":
        return _json_object(stripped.encode("utf-8"))
    return parse_pairs(stripped)


def _json_object(raw: bytes) -> dict[str, object]:
    value = json_value(raw)
    if not isinstance(value, dict):
        raise InvalidBody(
            "the body must be a JSON object",
            [Problem("body", f"expected a JSON object, got {_json_type(value)}")],
        )
    return value


def json_value(raw: bytes) -> object:
    """The JSON value of a body (a UTF-8 BOM skipped); :class:`InvalidBody` says what is wrong."""
    if raw.startswith(_UTF8_BOM):
        raw = raw[len(_UTF8_BOM) :]
    if not raw.strip():
        raise InvalidBody("the body is empty", [Problem("body", "empty")])
    try:
        return parse_json_object(raw)
    except orjson.JSONDecodeError as e:
        # orjson's message gives a position, never the text around it.
        raise InvalidBody(
            "the body is not valid JSON", [Problem("body", f"malformed JSON: {e}")]
        ) from None
    except DuplicateKey as e:
        raise InvalidBody(
            "the body gives a key more than once", [Problem(e.path, REPEATED)]
        ) from None
    except TooDeep:
        raise InvalidBody(
            "the body is nested too deeply", [Problem("body", "nested too deeply")]
        ) from None


def _json_type(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return "null"


def parse_pairs(text: str) -> dict[str, object]:
    """``key=value`` pairs (see the module docstring); :class:`InvalidBody` on bad items."""
    pairs: dict[str, object] = {}
    problems: list[Problem] = []
    i, n, item = 0, len(text), 0
    while True:
        while i < n and text[i] in _SEPARATORS:
            i += 1
        if i >= n:
            break
        item += 1
        match = _KEY.match(text, i)
        j = match.end() if match else i
        key = text[i:j]
        k = j
        while k < n and text[k] in " \t":
            k += 1
        if not key or k >= n or text[k] != "=":
            problems.append(Problem("body", f"item {item} is not key=value"))
            # Skip to the next separator so one bad item does not hide the rest.
            i = max(j, i + 1)
            while i < n and text[i] not in _SEPARATORS:
                i += 1
            continue
        k += 1
        while k < n and text[k] in " \t":
            k += 1
        if k < n and text[k] == '"':
            value, i, closed = _quoted(text, k + 1)
            if not closed:
                problems.append(Problem(key, "unterminated quoted value"))
                break
        else:
            end = k
            while end < n and text[end] not in _SEPARATORS:
                end += 1
            value, i = text[k:end], end
        if key in pairs:
            problems.append(Problem(key, "given more than once"))
        else:
            pairs[key] = value
    if problems:
        raise InvalidBody("the text body is not valid key=value pairs", problems)
    if not pairs:
        raise InvalidBody("the body is empty", [Problem("body", "empty")])
    return pairs


def _quoted(text: str, i: int) -> tuple[str, int, bool]:
    out: list[str] = []
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == "\\" and i + 1 < n:
            out.append(text[i + 1])
            i += 2
        elif ch == '"':
            return "".join(out), i + 1, True
        else:
            out.append(ch)
            i += 1
    return "".join(out), i, False
