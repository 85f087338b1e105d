"""JSON documents as the front doors read them: orjson, refusing a key given twice anywhere.

JSON parsers disagree on which of two values of one key counts, so a document that gives a
key twice is refused rather than read one way at a front door and another way downstream.
"""

from __future__ import annotations

import json

import orjson

REPEATED = "given more than once (JSON parsers disagree on which value counts)"
"""What is wrong with a key a JSON document gives twice."""


class DuplicateKey(ValueError):
    """A JSON object gives one key twice; ``path`` names it (``a``, ``a.b``, ``list[1].k``)."""

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(f"{path}: {REPEATED}")


class TooDeep(ValueError):
    """A JSON document nested deeper than the duplicate-key check can follow."""


class _Repeated(dict[str, object]):
    """An object that had a key twice; ``key`` is the first repeated one."""

    key = ""


def parse_json_object(data: bytes | str) -> object:
    """Parse JSON with orjson, refusing objects that repeat a key anywhere in the document.

    JSON parsers disagree on which of two values of one key counts, so a document that gives
    a key twice is refused rather than read one way here and another way downstream. Raises
    ``orjson.JSONDecodeError`` for what orjson refuses (malformed JSON, NaN, lone surrogates,
    ...), :class:`DuplicateKey` naming the first repeated key (after escapes: ``"a"`` and
    ``"\\u0061"`` are one key), and :class:`TooDeep` for documents nested more than about 900
    levels. The value returned is orjson's.
    """
    value = orjson.loads(data)
    repeated = False

    def pairs_hook(pairs: list[tuple[str, object]]) -> dict[str, object]:
        nonlocal repeated
        result = dict(pairs)
        if len(result) == len(pairs):
            return result
        repeated = True
        marked = _Repeated(result)
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                marked.key = key
                break
            seen.add(key)
        return marked

    try:
        checked = json.loads(data, object_pairs_hook=pairs_hook)
    except RecursionError:
        raise TooDeep("the JSON document is nested too deeply") from None
    if repeated:
        raise DuplicateKey(_repeated_path(checked))
    return value


def _repeated_path(document: object) -> str:
    stack: list[tuple[object, str]] = [(document, "")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, _Repeated):
            return f"{path}.{node.key}" if path else node.key
        if isinstance(node, dict):
            stack.extend((v, f"{path}.{k}" if path else k) for k, v in reversed(node.items()))
        elif isinstance(node, list):
            stack.extend((v, f"{path}[{i}]") for i, v in reversed(list(enumerate(node))))
    return "(unknown)"
