"""The primitive checks of a workflow file: each reads a value or notes a problem with its path."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import orjson

from streams.core.durations import DURATION_FORMS, format_duration, parse_duration
from streams.core.errors import InvalidValue
from streams.core.limits import MAX_FIELDS


def show(value: object) -> str:
    """Quote a value the way the file spells it (JSON-like), for problem messages."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return repr(value)


class Checker:
    """Accumulates problems while reading one file; every reader returns a value or None.

    ``table`` checks a sub-table's keys against ``table_keys`` (table name -> known keys).
    """

    def __init__(self, table_keys: Mapping[str, Sequence[str]]) -> None:
        self.problems: list[str] = []
        self._table_keys = table_keys

    def problem(self, path: str, message: str) -> None:
        self.problems.append(f"{path}: {message}")

    def unknown_keys(self, path: str, table: Mapping[str, object], known: Sequence[str]) -> None:
        for key in table:
            if key not in known:
                self.problem(f"{path}.{key}", f"unknown key (expected one of {', '.join(known)})")

    def table(self, path: str, parent: Mapping[str, object], key: str) -> dict[str, object] | None:
        value = parent.get(key)
        if value is None:
            return None
        if not isinstance(value, dict):
            self.problem(f"{path}.{key}", f"must be a table ([{key}]), got {show(value)}")
            return None
        self.unknown_keys(f"{path}.{key}", value, self._table_keys[key])
        return value

    def name(self, path: str, value: object, pattern: re.Pattern[str], what: str) -> str | None:
        if not isinstance(value, str) or not pattern.fullmatch(value):
            self.problem(path, f"{show(value)} is not a valid {what}")
            return None
        return value

    def names(
        self,
        path: str,
        value: object,
        pattern: re.Pattern[str],
        what: str,
        *,
        required: bool,
        most: int = MAX_FIELDS,
    ) -> tuple[str, ...] | None:
        if value is None:
            if required:
                self.problem(path, f"is required (a list of {what}s)")
            return None if required else ()
        if not isinstance(value, list):
            self.problem(path, f"must be a list of {what}s, got {show(value)}")
            return None
        result: list[str] = []
        ok = True
        for i, item in enumerate(value):
            name = self.name(f"{path}[{i}]", item, pattern, what)
            if name is None:
                ok = False
            elif name in result:
                self.problem(f"{path}[{i}]", f"{show(name)} is listed twice")
                ok = False
            else:
                result.append(name)
        if required and not value:
            self.problem(path, f"must list at least one {what}")
            ok = False
        if len(value) > most:
            self.problem(path, f"lists {len(value)} {what}s; at most {most} are allowed")
            ok = False
        return tuple(result) if ok else None

    def duration(
        self,
        path: str,
        value: object,
        default: int | None,
        *,
        most: int,
        positive: bool = True,
    ) -> int | None:
        if value is None:
            if default is None:
                self.problem(path, f"is required ({DURATION_FORMS})")
            return default
        try:
            ms = parse_duration(value)
        except InvalidValue:
            self.problem(path, f"{show(value)} is not a duration ({DURATION_FORMS})")
            return None
        if positive and ms <= 0:
            self.problem(path, f"{show(value)} must be longer than 0")
            return None
        if ms > most:
            self.problem(path, f"{show(value)} is too long: at most {format_duration(most)}")
            return None
        return ms
