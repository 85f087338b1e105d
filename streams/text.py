"""What counts as text for ids, keys, settings and the files an operator hands Sluicegate.

Linux passes arguments, environment variables and file contents as bytes; Python decodes
those that are not UTF-8 into lone surrogates (``surrogateescape``: byte ``0xff`` becomes
``"\\udcff"``). Such a string cannot be sent to Kafka as an Avro string, written into a
librdkafka or PostgreSQL setting, or looked up in the projection, and PostgreSQL text cannot
hold NUL either. Each of those would fail later with a traceback; :func:`not_text` names the
problem up front, so the caller can answer with one line that says where it is.

File *names* are not checked: they are bytes on Linux, and a non-UTF-8 name is a valid name.
"""

from __future__ import annotations

import re
from pathlib import Path

_ESCAPED = range(0xDC80, 0xDD00)
"""The surrogates ``surrogateescape`` makes of the bytes 0x80 to 0xff."""
_WHOLE = re.compile("[0-9]{1,20}")
"""What :func:`parse_whole` reads: ASCII digits only, few enough for any setting."""
_DURATION = re.compile(r"\s*(\d{1,9}(?:\.\d{1,6})?)\s*(ms|s|m)?\s*", re.ASCII)
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, None: 1.0}


class NotText(ValueError):
    """A file's content is not UTF-8 text; the message names the file, line, column and byte."""


def not_text(value: str) -> str | None:
    """``None`` if ``value`` is UTF-8 text without NUL; else what is wrong and where (a
    position counts characters from 0), never the value itself: it may be a secret."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        point = ord(value[e.start])
        if point in _ESCAPED:
            return f"byte 0x{point - 0xDC00:02x} at position {e.start} is not UTF-8"
        return f"a lone surrogate (U+{point:04X}) at position {e.start}"
    nul = value.find("\x00")
    return None if nul < 0 else f"a NUL character at position {nul}"


def read_text_file(path: Path) -> str:
    """The content of ``path`` decoded as UTF-8, newlines as they are.

    Raises :class:`NotText` naming the first byte that is not UTF-8 by line and column (from
    1, in bytes), and ``OSError`` as :meth:`Path.read_bytes` does.
    """
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise NotText(
            f"{path} is not UTF-8 text: {where(data, e.start)}; save it as UTF-8"
        ) from None


def where(data: bytes, offset: int) -> str:
    """``byte 0xNN at line L, column C`` for the byte at ``offset`` of ``data``."""
    line = data.count(b"\n", 0, offset) + 1
    column = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
    return f"byte 0x{data[offset]:02x} at line {line}, column {column}"


def parse_whole(text: str, maximum: int) -> int | None:
    """The value of ``text`` if it is 1 to 20 ASCII digits worth at most ``maximum``, else
    ``None`` (the caller says which setting and what it accepts).

    Not ``str.isdigit()`` then ``int()``: ``isdigit`` accepts superscripts such as ``"²"``,
    which ``int`` refuses, and any length, which ``int`` refuses past 4,300 digits: both were
    a ``ValueError`` traceback instead of the setting's one-line error.
    """
    if not _WHOLE.fullmatch(text):
        return None
    value = int(text)
    return value if value <= maximum else None


def parse_duration_s(text: str) -> float | None:
    """Seconds for ``250ms``/``2s``/``1.5s``/``5m``/``2``; ``None`` if ``text`` is not one.

    ASCII digits only (``float()`` would also take the digits of other scripts).
    """
    match = _DURATION.fullmatch(text)
    if match is None:
        return None
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
