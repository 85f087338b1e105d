"""A strict reader of Prometheus text exposition (format 0.0.4), for the tests of /metrics.

It refuses what a Prometheus server would (a sample without its family's HELP and TYPE
before it, a family split in two, a malformed name, label or value, a counter not named
``_total``), so a test that reads a page with it also checks its format.
"""

from __future__ import annotations

import math
import re

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\["\\n])*)"')
_SAMPLE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^\n]*\})? (\S+)")

Labels = frozenset[tuple[str, str]]


class Page:
    """Every sample of a page, by name and labels, with each family's type."""

    def __init__(self, text: str) -> None:
        self.samples: dict[tuple[str, Labels], float] = {}
        self.types: dict[str, str] = {}
        helped: set[str] = set()
        current: str | None = None
        assert text.endswith("\n"), "the page must end with a newline"
        for line in text[:-1].split("\n"):
            if line.startswith("# HELP "):
                name = line.split(" ", 3)[2]
                assert _NAME.fullmatch(name) and name not in helped, line
                helped.add(name)
                continue
            if line.startswith("# TYPE "):
                _, _, name, kind = line.split(" ")
                assert name in helped and name not in self.types, f"TYPE after HELP once: {line}"
                assert kind in ("counter", "gauge", "histogram"), line
                assert kind != "counter" or name.endswith("_total"), line
                self.types[name] = kind
                current = name
                continue
            found = _SAMPLE.fullmatch(line)
            assert found is not None, f"not a sample: {line!r}"
            name, braces, value = found.groups()
            own = {current}
            if current is not None and self.types.get(current) == "histogram":
                own = {f"{current}_bucket", f"{current}_sum", f"{current}_count"}
            assert name in own, f"{name} outside its family (now {current})"
            labels: list[tuple[str, str]] = []
            if braces:
                inner = braces[1:-1]
                parts = _LABEL.findall(inner)
                rebuilt = ",".join(f'{k}="{v}"' for k, v in parts)
                assert rebuilt == inner, f"malformed labels: {braces}"
                labels = [(k, _unescape(v)) for k, v in parts]
            number = float(value)
            assert not math.isnan(number), line
            key = (name, frozenset(labels))
            assert key not in self.samples, f"a sample twice: {line}"
            self.samples[key] = number

    def value(self, name: str, **labels: str) -> float:
        """The one sample of ``name`` whose labels include ``labels``."""
        found = self.all(name, **labels)
        assert len(found) == 1, (name, labels, found)
        return next(iter(found.values()))

    def all(self, name: str, **labels: str) -> dict[Labels, float]:
        """Every sample of ``name`` whose labels include ``labels``."""
        wanted = set(labels.items())
        return {
            each: number
            for (sample, each), number in self.samples.items()
            if sample == name and wanted <= each
        }


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), value)
