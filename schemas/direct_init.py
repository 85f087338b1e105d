"""A faster ``__init__`` for the contract's frozen records and the core's state records.

A frozen dataclass's generated ``__init__`` stores every field with ``object.__setattr__``, a
call per field (frozen instances refuse ordinary assignment). The processor builds several
such records per delivery (the decoded command, the events it decides, the run state it
evolves), and ``RunState`` alone has 32 fields: measured on the admission records, a frozen
``__init__`` of 32 fields takes about 5 us, writing the same values into the instance's
``__dict__`` about 1.4 us.

:func:`direct_init` gives a frozen dataclass an ``__init__`` that does that, and nothing else
changes: the same parameters in the same order with the same defaults (positional or by
keyword), the same attribute values, and the same ``TypeError`` for a missing or unknown
argument; assignment after construction still raises ``FrozenInstanceError``, and equality,
hashing, ``repr`` and ``dataclasses.replace`` are the dataclass's own. It refuses, with a
``TypeError`` at import time, any class it could not give exactly that: not a frozen dataclass,
``__slots__``, ``__post_init__``, ``InitVar`` or keyword-only fields, fields left out of
``__init__`` or built by a ``default_factory``.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, TypeVar

T = TypeVar("T")


def direct_init(cls: type[T]) -> type[T]:
    """``cls`` with the direct ``__init__`` (see the module docstring); use it above
    ``@dataclass(frozen=True)``."""
    fields = _fields(cls)
    namespace: dict[str, Any] = {}
    parameters: list[str] = []
    for field in fields:
        if field.default is dataclasses.MISSING:
            parameters.append(field.name)
        else:
            namespace[f"_default_{field.name}"] = field.default
            parameters.append(f"{field.name}=_default_{field.name}")
    # The instance dict is the frozen dataclass's own storage: writing it is what
    # object.__setattr__ ends up doing, without a call per field.
    # Dunder local names, so that no field (a plain identifier) can shadow them.
    lines = [
        f"def __init__(__self__, {', '.join(parameters)}):",
        "    __attributes__ = __self__.__dict__",
    ]
    lines += [f"    __attributes__[{field.name!r}] = {field.name}" for field in fields]
    source = "\n".join(lines) + "\n"
    exec(source, namespace)
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__doc__ = cls.__init__.__doc__
    init.__annotations__ = dict(cls.__init__.__annotations__)
    setattr(cls, "__init__", init)  # noqa: B010 - mypy refuses assigning a method
    return cls


def _fields(cls: type) -> tuple[dataclasses.Field[Any], ...]:
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or not params.init:
        raise TypeError(f"{cls.__name__}: direct_init is for frozen dataclasses with an __init__")
    if hasattr(cls, "__post_init__") or "__slots__" in cls.__dict__:
        raise TypeError(f"{cls.__name__} validates or has slots: keep the dataclass __init__")
    fields = dataclasses.fields(cls)
    if any(f.name.startswith("__") for f in fields):
        raise TypeError(f"{cls.__name__} has a field named like a dunder: keep its __init__")
    # The dataclass's own __init__ must take exactly the fields, positional or by keyword,
    # with their plain defaults: that rules out InitVar and keyword-only fields, fields left
    # out of __init__ and default factories (whose default shows as a sentinel).
    expected = [
        inspect.Parameter(
            f.name,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            default=inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default,
        )
        for f in fields
    ]
    generated = list(inspect.signature(cls).parameters.values())
    if [(p.name, p.kind, p.default) for p in generated] != [
        (p.name, p.kind, p.default) for p in expected
    ]:
        raise TypeError(
            f"{cls.__name__}'s __init__ takes more than its fields by position or keyword "
            "(InitVar, keyword-only, init=False or default_factory): keep the dataclass __init__"
        )
    return fields
