"""``sluicegate serve --projectors N``: the children it runs and how each is started."""

from __future__ import annotations

import pytest

from consumers.gateway.settings import GatewaySettings
from sluicegate.errors import SluicegateError
from sluicegate.supervisor import _command, components_for, kind_of, parse_projectors


def test_one_projector_is_the_default_and_keeps_its_name() -> None:
    names = components_for(GatewaySettings())
    assert names == components_for(GatewaySettings(), 1)
    assert "projector" in names and not any(n.startswith("projector:") for n in names)


def test_n_projectors_take_one_share_each_in_the_projectors_place() -> None:
    one = components_for(GatewaySettings())
    three = components_for(GatewaySettings(), 3)
    at = one.index("projector")
    assert three[at : at + 3] == ["projector:0/3", "projector:1/3", "projector:2/3"]
    assert three[:at] == one[:at] and three[at + 3 :] == one[at + 1 :]
    assert {kind_of(n) for n in three} == set(one)


def test_a_share_projector_is_started_with_its_share() -> None:
    assert _command("projector:1/3", GatewaySettings())[-3:] == ["projector", "--share", "1/3"]
    assert _command("projector", GatewaySettings())[-1] == "projector"


@pytest.mark.parametrize("text,count", [("1", 1), (" 4 ", 4), ("64", 64)])
def test_a_number_of_projectors_is_read(text: str, count: int) -> None:
    assert parse_projectors(text) == count


@pytest.mark.parametrize("text", ["0", "-1", "65", "two", "", "1.5", "\u00b2", "1" * 5000])
def test_a_number_of_projectors_out_of_range_is_refused(text: str) -> None:
    with pytest.raises(SluicegateError, match="a whole number from 1 to 64"):
        parse_projectors(text)
