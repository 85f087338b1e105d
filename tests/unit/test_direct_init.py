"""The direct ``__init__`` builds what the dataclass's own would, for every record it is on."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from dataclasses import FrozenInstanceError, InitVar, dataclass, field

import pytest

from schemas.direct_init import constructor, direct_init
from schemas.records import Record
from streams.core.admission.state import OccurrenceState, RunState, SlotState
from streams.core.lifecycle import BranchStatus

LAUNCHED = BranchStatus.LAUNCHED
RECORDS = [*typing.get_args(Record), OccurrenceState, RunState, SlotState]


def _plain_twin(cls: type) -> type:
    """The same fields as a frozen dataclass with the generated ``__init__``."""
    specs = [
        (f.name, f.type, field(default=f.default))
        if f.default is not dataclasses.MISSING
        else (f.name, f.type)
        for f in dataclasses.fields(cls)
    ]
    return dataclasses.make_dataclass(f"Plain{cls.__name__}", specs, frozen=True)


@pytest.mark.parametrize("cls", RECORDS, ids=lambda c: c.__name__)
def test_every_record_has_the_direct_init(cls: type) -> None:
    init = vars(cls)["__init__"]
    assert init.__qualname__ == f"{cls.__qualname__}.__init__"
    assert "__attributes__" in init.__code__.co_varnames


@pytest.mark.parametrize("cls", RECORDS, ids=lambda c: c.__name__)
def test_it_takes_the_parameters_of_the_dataclass_init(cls: type) -> None:
    twin = _plain_twin(cls)
    ours = inspect.signature(cls).parameters
    theirs = inspect.signature(twin).parameters
    assert [(p.name, p.kind, p.default) for p in ours.values()] == [
        (p.name, p.kind, p.default) for p in theirs.values()
    ]


@pytest.mark.parametrize("cls", RECORDS, ids=lambda c: c.__name__)
def test_it_stores_what_the_dataclass_init_stores(cls: type) -> None:
    fields = dataclasses.fields(cls)
    required = [object() for f in fields if f.default is dataclasses.MISSING]
    built = cls(*required)
    twin = _plain_twin(cls)(*required)
    assert vars(built) == vars(twin)
    assert list(vars(built)) == [f.name for f in fields]
    # By keyword, every field given: the same values.
    values = {f.name: object() for f in fields}
    assert vars(cls(**values)) == values


@pytest.mark.parametrize("cls", RECORDS, ids=lambda c: c.__name__)
def test_the_record_stays_frozen(cls: type) -> None:
    fields = dataclasses.fields(cls)
    built = cls(*[0 for f in fields if f.default is dataclasses.MISSING])
    with pytest.raises(FrozenInstanceError):
        setattr(built, fields[0].name, 1)


def test_argument_errors_are_the_usual_type_errors() -> None:
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'slot'"):
        SlotState(status=LAUNCHED, attempt=1, timeout_at_ms=0)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        SlotState("a", LAUNCHED, 1, 0, colour=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="takes 5 positional arguments but 6 were given"):
        SlotState("a", LAUNCHED, 1, 0, 9)  # type: ignore[call-arg]


def test_equality_hash_repr_and_replace_are_the_dataclass_ones() -> None:
    a = SlotState("a", LAUNCHED, 1, 5)
    b = SlotState(slot="a", status=LAUNCHED, attempt=1, timeout_at_ms=5)
    assert a == b and hash(a) == hash(b)
    assert repr(a) == f"SlotState(slot='a', status={LAUNCHED!r}, attempt=1, timeout_at_ms=5)"
    assert dataclasses.replace(a, attempt=2) == SlotState("a", LAUNCHED, 2, 5)


def test_field_names_cannot_shadow_the_init_s_own_names() -> None:
    @direct_init
    @dataclass(frozen=True)
    class Awkward:
        self: int
        attributes: int = 2
        namespace: int = 3

    assert vars(Awkward(1)) == {"self": 1, "attributes": 2, "namespace": 3}


def _refused(make: typing.Callable[[], type]) -> None:
    with pytest.raises(TypeError, match=r"dataclass __init__|frozen dataclasses|dunder"):
        make()


def test_what_it_cannot_reproduce_is_refused() -> None:
    def not_frozen() -> type:
        @direct_init
        @dataclass
        class Open:
            x: int

        return Open

    def validating() -> type:
        @direct_init
        @dataclass(frozen=True)
        class Checked:
            x: int

            def __post_init__(self) -> None:
                pass

        return Checked

    def slotted() -> type:
        @direct_init
        @dataclass(frozen=True, slots=True)
        class Slotted:
            x: int

        return Slotted

    def factory() -> type:
        @direct_init
        @dataclass(frozen=True)
        class Factory:
            x: tuple[int, ...] = field(default_factory=tuple)

        return Factory

    def keyword_only() -> type:
        @direct_init
        @dataclass(frozen=True, kw_only=True)
        class KeywordOnly:
            x: int

        return KeywordOnly

    def left_out() -> type:
        @direct_init
        @dataclass(frozen=True)
        class LeftOut:
            x: int
            y: int = field(default=0, init=False)

        return LeftOut

    def init_var() -> type:
        @direct_init
        @dataclass(frozen=True)
        class WithInitVar:
            x: int
            seed: InitVar[int]

        return WithInitVar

    def dunder() -> type:
        @direct_init
        @dataclass(frozen=True)
        class Dunder:
            __attributes__: int

        return Dunder

    def plain_class() -> type:
        @direct_init
        class Plain:
            pass

        return Plain

    for make in (
        not_frozen,
        validating,
        slotted,
        factory,
        keyword_only,
        left_out,
        init_var,
        dunder,
        plain_class,
    ):
        _refused(make)


# -- constructor(): the class call as a plain function -------------------------------------


@pytest.mark.parametrize("cls", RECORDS, ids=lambda c: c.__name__)
def test_the_constructor_builds_what_the_class_call_builds(cls: type) -> None:
    build = constructor(cls)
    fields = dataclasses.fields(cls)
    assert list(inspect.signature(build).parameters.values()) == list(
        inspect.signature(cls).parameters.values()
    )
    required = [object() for f in fields if f.default is dataclasses.MISSING]
    for made, called in (
        (build(*required), cls(*required)),
        (build(**{f.name: 7 for f in fields}), cls(**{f.name: 7 for f in fields})),
    ):
        assert type(made) is cls
        assert vars(made) == vars(called)
        assert list(vars(made)) == list(vars(called))
        assert made == called and repr(made) == repr(called)
    with pytest.raises(FrozenInstanceError):
        setattr(build(*required), fields[0].name, 1)


def test_the_constructor_s_argument_errors_are_type_errors() -> None:
    build = constructor(SlotState)
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'slot'"):
        build(status=LAUNCHED, attempt=1, timeout_at_ms=0)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        build("a", LAUNCHED, 1, 0, colour=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"SlotState\(\) takes 4 positional arguments but 5 were"):
        build("a", LAUNCHED, 1, 0, 9)  # type: ignore[call-arg]
    assert build("a", LAUNCHED, 1, 0) == SlotState("a", LAUNCHED, 1, 0)


def test_field_names_cannot_shadow_the_constructor_s_own_names() -> None:
    @direct_init
    @dataclass(frozen=True)
    class Named:
        Named: int
        cls: int = 2
        new: int = 3
        self: int = 4

    built = constructor(Named)(1)
    assert type(built) is Named
    assert vars(built) == {"Named": 1, "cls": 2, "new": 3, "self": 4}


def test_the_constructor_needs_the_direct_init() -> None:
    @dataclass(frozen=True)
    class Plain:
        a: int

    with pytest.raises(TypeError, match="@direct_init"):
        constructor(Plain)
    with pytest.raises(TypeError, match="@direct_init"):
        constructor(len)
