"""A fast ``dataclasses.replace`` for the core's plain frozen state records.

``dataclasses.replace`` re-runs ``__init__`` through ``fields()`` introspection, about ten
times the cost of copying the instance's attributes; evolve calls it for every event it
folds, so on the admission hot path it was a large share of the time. :func:`changed`
copies the attributes instead, which is equivalent for a frozen dataclass that has no
``__post_init__`` and no ``__slots__``: those are refused (``TypeError``),
as is a name that is not a field.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

T = TypeVar("T")

_FIELDS: dict[type, frozenset[str]] = {}


def changed(record: T, **changes: Any) -> T:
    """A copy of ``record`` with ``changes`` (what ``dataclasses.replace`` returns)."""
    cls = type(record)
    names = _FIELDS.get(cls)
    if names is None:
        names = _plain_fields(cls)
    unknown = changes.keys() - names
    if unknown:
        raise TypeError(f"{cls.__name__} has no field {', '.join(sorted(unknown))}")
    copy = object.__new__(cls)
    attributes = copy.__dict__
    attributes.update(record.__dict__)
    attributes.update(changes)
    return copy


def _plain_fields(cls: type) -> frozenset[str]:
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen:
        raise TypeError(f"{cls.__name__} is not a frozen dataclass")
    if hasattr(cls, "__post_init__") or hasattr(cls, "__slots__"):
        raise TypeError(f"{cls.__name__} validates or has slots: use dataclasses.replace")
    names = frozenset(f.name for f in dataclasses.fields(cls))
    _FIELDS[cls] = names
    return names
