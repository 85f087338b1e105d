"""Canonical values: every field value is reduced to one canonical string before it is compared
or hashed (by :mod:`streams.core.identity`), so that spellings of one value are one value:

* absent keys, ``null`` and blank strings are *missing*;
* strings are stripped of surrounding whitespace; a string with a control character inside
  (U+0000-U+001F, U+007F-U+009F: NUL, escape sequences, ...) is *invalid* in every role, and
  an identity, scope, sequence or ``source`` value longer than
  :data:`~streams.core.limits.MAX_FIELD_CHARS` characters is invalid too;
* venue fields (``venue``, ``exchange``) are folded to lower case and instrument fields
  (``instrument``, ``symbol``, ``ticker``) to upper case, unless the workflow lists them in
  ``identity.case_sensitive``; other strings keep their case;
* the ``interval`` field is written in its one canonical spelling (``1``, ``1m`` and ``60s``
  are ``1m``; ``60`` and ``1h`` are ``1h``; ``D`` and ``1d`` are ``1d``);
* numbers, and strings that are plain decimal numbers, are rendered as a normalized decimal:
  ``97000.50``, ``"97000.50"`` and ``97000.5`` all become ``"97000.5"``; ``"1e3"`` becomes
  ``"1000"``. Strings with leading zeros (``"007"``) are identifiers, not numbers, and are
  kept as written so they cannot collide with ``"7"``;
* booleans become ``"true"``/``"false"``;
* *time fields* become decimal epoch milliseconds, so an RFC 3339 copy and an epoch-ms copy of
  the same candle agree. A field is a time field when its name is ``time`` or ``timestamp``,
  ends with ``_open``, ``_close``, ``_time`` or ``_at``, or is the workflow's
  ``validity_source_time`` field (:mod:`streams.core.fields` has these rules);
* arrays and objects are refused in identity, scope and sequence fields; in immutable fields
  they are kept as canonical JSON (sorted keys).
"""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Mapping
from decimal import Context, Decimal, InvalidOperation
from functools import lru_cache

import orjson

from streams.core.durations import format_interval, parse_interval, parse_time
from streams.core.errors import InvalidValue
from streams.core.fields import Kind
from streams.core.limits import MAX_FIELD_CHARS

# A plain decimal: no leading zeros (so identifiers such as "007" stay strings), optional
# fraction and exponent. At most 100 characters so normalizing can never round.
_DECIMAL_RE = re.compile(r"[+-]?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]{1,6})?")
_DECIMAL_MAX_LEN = 100
_DECIMAL_CONTEXT = Context(prec=200)
# Beyond this magnitude a fixed-point rendering would be huge; scientific notation is just as
# canonical.
_FIXED_POINT_LIMIT = 50
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def canonical_number(value: Decimal) -> str:
    """Normalized decimal rendering: no trailing zeros, no exponent for ordinary magnitudes."""
    normalized = value.normalize(_DECIMAL_CONTEXT)
    if normalized.is_zero():
        return "0"
    if -_FIXED_POINT_LIMIT <= normalized.adjusted() <= _FIXED_POINT_LIMIT:
        return format(normalized, "f")
    return str(normalized)


def canonical_json(payload: Mapping[str, object]) -> str:
    """The payload as canonical JSON: sorted keys, no whitespace (orjson)."""
    return orjson.dumps(dict(payload), option=orjson.OPT_SORT_KEYS).decode()


class Unreadable(Exception):
    """A field value that is missing (``missing``) or cannot be read (``detail`` says why).

    Raised by :func:`canonical`; the identity reader turns it into a ``FieldProblem`` with the
    field's role, so it never leaves the core.
    """

    def __init__(self, missing: bool, detail: str = "") -> None:
        self.missing = missing
        self.detail = detail
        super().__init__(detail)


def canonical(value: object, kind: Kind, *, opaque: bool, structured: bool, bounded: bool) -> str:
    """Canonical string of one field value, or raise _FieldProblem (missing or invalid)."""
    if value is None:
        raise Unreadable(missing=True)
    if isinstance(value, str):
        if len(value) <= _CACHED_CHARS:
            result = _canonical_string_cached(value, kind, opaque)
        else:
            result = _canonical_string(value, kind, opaque)
    elif kind is Kind.TIME:
        result = _time(value)
    elif kind is Kind.INTERVAL and isinstance(value, int) and not isinstance(value, bool):
        result = _canonical_text(str(value), kind, opaque)
    elif isinstance(value, bool):
        result = "true" if value else "false"
    elif isinstance(value, int):
        result = canonical_number(Decimal(value))
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise Unreadable(missing=False, detail="is not a finite number")
        result = canonical_number(Decimal(repr(value)))
    elif structured and isinstance(value, list | dict):
        _check_nested(value)
        try:
            result = orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
        except TypeError as exc:
            raise Unreadable(missing=False, detail="is not plain JSON") from exc
    else:
        raise Unreadable(
            missing=False, detail=f"must be a string or number, got {type(value).__name__}"
        )
    if bounded and len(result) > MAX_FIELD_CHARS:
        raise Unreadable(
            missing=False,
            detail=f"is {len(result)} characters long; at most {MAX_FIELD_CHARS} are allowed",
        )
    return result


def _canonical_string(value: str, kind: Kind, opaque: bool) -> str:
    text = value.strip()
    if not text:
        raise Unreadable(missing=True)
    control = _CONTROL.search(text)
    if control is not None:
        raise Unreadable(missing=False, detail=_control_detail(control.group()))
    return _canonical_text(text, kind, opaque)


# Venues, instruments, intervals, rules, sides and candle times repeat from one delivery to
# the next; only short strings are kept, so the cache stays small whatever senders send.
_CACHED_CHARS = 128
_canonical_string_cached = lru_cache(maxsize=8192)(_canonical_string)


def _canonical_text(text: str, kind: Kind, opaque: bool) -> str:
    if kind is Kind.TIME:
        return _time(text)
    if opaque:
        return text
    if kind is Kind.INTERVAL:
        try:
            return format_interval(parse_interval(text))
        except InvalidValue:
            return text  # not an interval: kept as written, cannot equal a canonical one
    if len(text) <= _DECIMAL_MAX_LEN and _DECIMAL_RE.fullmatch(text):
        with contextlib.suppress(InvalidOperation, ArithmeticError):
            text = canonical_number(Decimal(text))
    if kind is Kind.LOWER:
        return text.lower()
    if kind is Kind.UPPER:
        return text.upper()
    return text


def _time(value: object) -> str:
    try:
        return str(parse_time(value))
    except InvalidValue as exc:
        raise Unreadable(missing=False, detail=str(exc)) from exc


def _control_detail(char: str) -> str:
    return f"contains a control character (U+{ord(char):04X})"


def _check_nested(value: object) -> None:
    """Refuse control characters anywhere in a structured value (keys included)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            control = _CONTROL.search(item)
            if control is not None:
                raise Unreadable(missing=False, detail=_control_detail(control.group()))
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
