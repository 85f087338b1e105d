"""``changed`` returns what ``dataclasses.replace`` returns, and refuses what it cannot copy."""

from __future__ import annotations

import dataclasses

import pytest

from streams.core.admission.state import OccurrenceState, SlotState
from streams.core.lifecycle import BranchStatus
from streams.core.records import changed


def test_changed_equals_replace_and_leaves_the_original() -> None:
    slot = SlotState("signal", BranchStatus.LAUNCHED, 1, 5_000)
    moved = changed(slot, status=BranchStatus.STARTED, attempt=2)
    assert moved == dataclasses.replace(slot, status=BranchStatus.STARTED, attempt=2)
    assert slot.status is BranchStatus.LAUNCHED and slot.attempt == 1
    assert hash(moved) == hash(dataclasses.replace(slot, status=BranchStatus.STARTED, attempt=2))
    with pytest.raises(dataclasses.FrozenInstanceError):
        moved.attempt = 3  # type: ignore[misc]


def test_an_unknown_field_is_refused() -> None:
    state = OccurrenceState("k", (), None)
    with pytest.raises(TypeError, match="no field runz"):
        changed(state, runz=())


@dataclasses.dataclass(frozen=True)
class Validated:
    value: int

    def __post_init__(self) -> None:
        if self.value < 0:
            raise ValueError("negative")


@dataclasses.dataclass
class Mutable:
    value: int


@pytest.mark.parametrize("record", [Validated(1), Mutable(1)])
def test_records_it_cannot_copy_faithfully_are_refused(record: object) -> None:
    with pytest.raises(TypeError):
        changed(record, value=-1)
