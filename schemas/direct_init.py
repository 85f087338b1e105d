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

:func:`constructor` goes one step further for the few records built on every delivery: a
plain function with the same parameters that returns the same instance as calling the class.
Calling a class with keyword arguments goes through ``type.__call__``, which packs the
keywords into a dict and unpacks them again for ``__init__`` (about 0.7 us of the 1.9 us a
14-field ``BranchLaunched(...)`` takes by keyword); a function receives them as they are.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

T = TypeVar("T")
P = ParamSpec("P")


def direct_init(cls: type[T]) -> type[T]:
    """``cls`` with the direct ``__init__`` (see the module docstring); use it above
    ``@dataclass(frozen=True)``."""
    fields = _fields(cls)
    namespace, parameters = _parameters(fields)
    # The instance dict is the frozen dataclass's own storage: writing it is what
    # object.__setattr__ ends up doing, without a call per field.
    # Dunder local names, so that no field (a plain identifier) can shadow them.
    lines = [
        f"def __init__(__self__, {parameters}):",
        "    __attributes__ = __self__.__dict__",
        *_stores(fields),
    ]
    exec("\n".join(lines) + "\n", namespace)
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__doc__ = cls.__init__.__doc__
    init.__annotations__ = dict(cls.__init__.__annotations__)
    setattr(cls, "__init__", init)  # noqa: B010 - mypy refuses assigning a method
    return cls


def constructor(cls: Callable[P, T]) -> Callable[P, T]:
    """A function that builds ``cls(*args, **kwargs)``: the same parameters, defaults and
    ``TypeError``\\ s, and an instance equal to (and indistinguishable from) the one the class
    call returns, without ``type.__call__`` (see the module docstring). ``cls`` must carry
    :func:`direct_init`, whose ``__init__`` this repeats; anything else is refused with a
    ``TypeError``."""
    if not isinstance(cls, type) or not _has_direct_init(cls):
        raise TypeError(f"{cls!r}: constructor() needs a class decorated with @direct_init")
    fields = _fields(cls)
    namespace, parameters = _parameters(fields)
    namespace["__new__"] = object.__new__
    namespace["__cls__"] = cls
    lines = [
        f"def {cls.__name__}({parameters}):",
        "    __self__ = __new__(__cls__)",
        "    __attributes__ = __self__.__dict__",
        *_stores(fields),
        "    return __self__",
    ]
    exec("\n".join(lines) + "\n", namespace)
    build: Callable[P, T] = namespace[cls.__name__]
    build.__qualname__ = cls.__qualname__
    build.__module__ = cls.__module__
    build.__doc__ = f"Build a {cls.__name__} (as {cls.__name__}(...) does, a little faster)."
    build.__annotations__ = {
        name: kind
        for name, kind in vars(cls)["__init__"].__annotations__.items()
        if name != "return"
    }
    return build


def _has_direct_init(cls: type) -> bool:
    init = cls.__dict__.get("__init__")
    code = getattr(init, "__code__", None)
    return code is not None and "__attributes__" in code.co_varnames


def _parameters(fields: tuple[dataclasses.Field[Any], ...]) -> tuple[dict[str, Any], str]:
    """The generated functions' namespace (the fields' defaults) and parameter list."""
    namespace: dict[str, Any] = {}
    parameters: list[str] = []
    for field in fields:
        if field.default is dataclasses.MISSING:
            parameters.append(field.name)
        else:
            namespace[f"_default_{field.name}"] = field.default
            parameters.append(f"{field.name}=_default_{field.name}")
    return namespace, ", ".join(parameters)


def _stores(fields: tuple[dataclasses.Field[Any], ...]) -> list[str]:
    return [f"    __attributes__[{field.name!r}] = {field.name}" for field in fields]


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
