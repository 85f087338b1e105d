"""Durations, instants and candle intervals as integer epoch milliseconds.

The core keeps every time as an ``int`` of milliseconds (UTC epoch for instants), because
integer arithmetic is exact and the same on every machine; the deadline of a signal must not
depend on float rounding.

Accepted forms:

* durations (:func:`parse_duration`): ``<digits><unit>`` with unit ``ms``, ``s``, ``m``, ``h``
  or ``d`` (``250ms``, ``5s``, ``2m``, ``1h``, ``7d``), or a bare ``int`` meaning
  milliseconds;
* instants (:func:`parse_time`): RFC 3339 with an explicit offset (``Z``, ``+00:00``, or any
  other offset, converted to UTC; fractional seconds truncated to the millisecond), or epoch
  milliseconds as an ``int`` or a string of digits;
* candle intervals (:func:`parse_interval`): ``<digits><unit>`` with unit ``s``, ``m``, ``h``,
  ``d`` or ``w`` (``1m``, ``5m``, ``15m``, ``1h``, ``4h``, ``1d``, ``1w``), plus TradingView's
  ``{{interval}}`` forms (bare digits are minutes; ``S``/``1S`` a second,
  ``D``/``1D`` a day, ``W``/``1W`` a week). Months are refused: their length varies, so
  "candle open + interval" would be ambiguous. :func:`format_interval` gives the one canonical
  spelling of an interval (``"60"``, ``"60m"`` and ``"1h"`` are all ``"1h"``).

Source times (the instants deadlines and timers are computed from) must lie in
``[MIN_SOURCE_TIME_MS, MAX_SOURCE_TIME_MS)`` (2000-01-01 to 2200-01-01): anything outside is a
unit mistake or a sender extending its own validity, and the bound keeps every due time the
engine schedules within its 13-digit timer keys (year 2286).

Every parser raises :class:`~streams.core.errors.InvalidValue` with a message that quotes the
value and names the accepted forms.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

from streams.core.errors import InvalidValue

MS_PER_SECOND = 1_000
MS_PER_MINUTE = 60 * MS_PER_SECOND
MS_PER_HOUR = 60 * MS_PER_MINUTE
MS_PER_DAY = 24 * MS_PER_HOUR
MS_PER_WEEK = 7 * MS_PER_DAY

DURATION_FORMS = "use 250ms, 5s, 2m, 1h, 7d"
TIME_FORMS = "use RFC 3339 like 2026-11-30T12:00:00Z or epoch milliseconds"
INTERVAL_FORMS = "use 1m, 5m, 15m, 1h, 4h, 1d, 1w"

# Largest instant datetime can represent (9999-12-31T23:59:59.999Z); beyond it nothing can
# be formatted back, so such a value is almost certainly a unit mistake (microseconds).
MAX_EPOCH_MS = 253_402_300_799_999

MAX_INTERVAL_MS = 366 * MS_PER_DAY
"""Longest accepted candle interval; anything longer is a unit mistake, not a candle."""

MIN_SOURCE_TIME_MS = 946_684_800_000
"""2000-01-01T00:00:00Z: the earliest accepted source time."""
MAX_SOURCE_TIME_MS = 7_258_118_400_000
"""2200-01-01T00:00:00Z: source times must be earlier (see the module docstring)."""

_DURATION_UNITS = {
    "ms": 1,
    "s": MS_PER_SECOND,
    "m": MS_PER_MINUTE,
    "h": MS_PER_HOUR,
    "d": MS_PER_DAY,
}
# Largest unit first, so format_duration picks the most readable exact form.
_FORMAT_UNITS = (("d", MS_PER_DAY), ("h", MS_PER_HOUR), ("m", MS_PER_MINUTE), ("s", MS_PER_SECOND))
_INTERVAL_FORMAT_UNITS = (("w", MS_PER_WEEK), *_FORMAT_UNITS)
_INTERVAL_UNITS = {
    "s": MS_PER_SECOND,
    "m": MS_PER_MINUTE,
    "h": MS_PER_HOUR,
    "d": MS_PER_DAY,
    "w": MS_PER_WEEK,
}

_DURATION_RE = re.compile(r"([0-9]{1,15})(ms|s|m|h|d)")
_INTERVAL_RE = re.compile(r"([0-9]{1,8})(s|m|h|d|w)")
_MINUTES_RE = re.compile(r"[0-9]{1,6}")
_TV_INTERVAL_RE = re.compile(r"([0-9]{0,6})([SDW])")
_TV_UNITS = {"S": MS_PER_SECOND, "D": MS_PER_DAY, "W": MS_PER_WEEK}
_EPOCH_MS_RE = re.compile(r"[0-9]{1,15}")
_RFC3339_RE = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,9}))?"
    r"(?:([Zz])|([+-])([0-9]{2}):([0-9]{2}))"
)
# The same without an offset: refused, but with a message that says what is missing.
_NAIVE_TIME_RE = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?"
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MS = timedelta(milliseconds=1)


def _quote(value: object) -> str:
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(value)


def parse_duration(value: object) -> int:
    """Return the duration ``value`` in milliseconds (``"5s"`` -> ``5000``; ``250`` -> 250).

    Raises :class:`InvalidValue` for anything else, including negative numbers, booleans,
    fractions (``"1.5s"``) and unit-less strings (``"250"`` is ambiguous in a config file).
    """
    if isinstance(value, bool):
        raise InvalidValue(f"{_quote(value)} is not a duration ({DURATION_FORMS})")
    if isinstance(value, int):
        if value < 0:
            raise InvalidValue(f"{value} is negative; a duration is at least 0ms")
        return value
    if isinstance(value, str):
        match = _DURATION_RE.fullmatch(value.strip())
        if match is not None:
            return int(match.group(1)) * _DURATION_UNITS[match.group(2)]
    raise InvalidValue(f"{_quote(value)} is not a duration ({DURATION_FORMS})")


def format_duration(ms: int) -> str:
    """Render ``ms`` in the largest unit that represents it exactly (``90000`` -> ``"90s"``).

    ``parse_duration(format_duration(ms)) == ms`` for every ``ms >= 0``.
    """
    if ms < 0:
        raise InvalidValue(f"{ms} is negative; a duration is at least 0ms")
    for unit, size in _FORMAT_UNITS:
        if ms and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def parse_time(value: object) -> int:
    """Return the instant ``value`` as epoch milliseconds UTC.

    Accepts RFC 3339 strings with an explicit offset (``2026-11-30T12:00:00Z``,
    ``2026-11-30T12:00:00.250+00:00``, ``2026-11-30T13:00:00+01:00``; sub-millisecond digits
    are truncated) and epoch milliseconds as a non-negative ``int``, an integral ``float`` or a
    string of digits. A time without an offset is refused: guessing a zone would move the
    deadline by hours.
    """
    if isinstance(value, bool):
        raise InvalidValue(f"{_quote(value)} is not a time ({TIME_FORMS})")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int):
        return _check_epoch_ms(value, value)
    if isinstance(value, str):
        text = value.strip()
        if _EPOCH_MS_RE.fullmatch(text):
            return _check_epoch_ms(int(text), value)
        match = _RFC3339_RE.fullmatch(text)
        if match is not None:
            return _check_epoch_ms(_rfc3339_ms(match, value), value)
        if _NAIVE_TIME_RE.fullmatch(text):
            raise InvalidValue(f"{_quote(value)} has no UTC offset; add Z or +HH:MM ({TIME_FORMS})")
    raise InvalidValue(f"{_quote(value)} is not a time ({TIME_FORMS})")


def _check_epoch_ms(ms: int, original: object) -> int:
    if not 0 <= ms <= MAX_EPOCH_MS:
        raise InvalidValue(
            f"{_quote(original)} is out of range for epoch milliseconds ({TIME_FORMS})"
        )
    return ms


def _rfc3339_ms(match: re.Match[str], original: object) -> int:
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    fraction = match.group(7) or ""
    if match.group(8):
        offset = timedelta(0)
    else:
        off_hours, off_minutes = int(match.group(10)), int(match.group(11))
        if off_hours > 23 or off_minutes > 59:
            raise InvalidValue(f"{_quote(original)} has an invalid UTC offset ({TIME_FORMS})")
        offset = timedelta(hours=off_hours, minutes=off_minutes)
        if match.group(9) == "-":
            offset = -offset
    try:
        instant = datetime(year, month, day, hour, minute, second, tzinfo=timezone(offset))
    except ValueError as exc:
        raise InvalidValue(f"{_quote(original)} is not a valid time: {exc} ({TIME_FORMS})") from exc
    whole_ms = (instant - _EPOCH) // _ONE_MS
    return whole_ms + int((fraction + "000")[:3])


def format_time(ms: int) -> str:
    """Render epoch milliseconds as RFC 3339 UTC (``2026-11-30T12:00:00.000Z``)."""
    instant = _EPOCH + ms * _ONE_MS
    return instant.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def parse_interval(value: object) -> int:
    """Return a candle interval in milliseconds (``"1m"`` -> ``60000``; ``"1w"`` -> a week).

    Also accepts TradingView's interval strings: bare digits are minutes (``"60"`` -> 1h),
    ``"S"``/``"1S"`` seconds, ``"D"``/``"1D"`` days and ``"W"``/``"1W"`` weeks. A whole JSON
    number means what its digits mean as a string (TradingView's ``{{interval}}`` written
    without quotes: ``60`` -> 1h). Zero, months and intervals longer than 366 days are refused.
    """
    ms: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if isinstance(value, str):
        text = value.strip()
        match = _INTERVAL_RE.fullmatch(text)
        if match is not None:
            ms = int(match.group(1)) * _INTERVAL_UNITS[match.group(2)]
        elif _MINUTES_RE.fullmatch(text):
            ms = int(text) * MS_PER_MINUTE
        else:
            tv = _TV_INTERVAL_RE.fullmatch(text)
            if tv is not None:
                ms = int(tv.group(1) or "1") * _TV_UNITS[tv.group(2)]
    if ms is not None and 0 < ms <= MAX_INTERVAL_MS:
        return ms
    raise InvalidValue(f"{_quote(value)} is not a candle interval ({INTERVAL_FORMS})")


def format_interval(ms: int) -> str:
    """The canonical spelling of an interval: its largest exact unit (``3600000`` -> ``"1h"``).

    ``parse_interval(format_interval(ms)) == ms`` for every interval ``parse_interval``
    accepts; ``86400000`` is ``"1d"`` and ``604800000`` is ``"1w"``.
    """
    for unit, size in _INTERVAL_FORMAT_UNITS:
        if ms and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def check_source_time(ms: int) -> str | None:
    """Why ``ms`` is not an acceptable source time, or ``None`` when it is."""
    if ms < MIN_SOURCE_TIME_MS:
        return f"is {format_time(ms)}, before {format_time(MIN_SOURCE_TIME_MS)}"
    if ms >= MAX_SOURCE_TIME_MS:
        return f"is {format_time(ms)}, not before {format_time(MAX_SOURCE_TIME_MS)}"
    return None
