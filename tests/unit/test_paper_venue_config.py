"""The paper venue's configuration file: the example loads, mistakes are named."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from consumers.paper_venue.config import default_config, load_config
from consumers.paper_venue.errors import PaperVenueError
from consumers.paper_venue.server import open_venue

ROOT = Path(__file__).resolve().parents[2]


def test_the_example_is_the_default_configuration() -> None:
    assert load_config(ROOT / "examples" / "venue.toml") == default_config()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("maker_commission = 0.001", "write amounts as strings"),
        ('colour = "red"', "unknown key(s) colour"),
        ('[[symbols]]\nsymbol = "X"\nbase = "A"\nquote = "B"\n', "'price' is required"),
        (
            '[[symbols]]\nsymbol = "X"\nbase = "A"\nquote = "B"\nprice = "1"\n'
            'step_size = "0.000000001"',
            "at most 8 decimals",
        ),
        (
            '[[accounts]]\nname = "a"\napi_key = "k"\napi_secret = "s"\n'
            '[[accounts]]\nname = "b"\napi_key = "k"\napi_secret = "t"\n',
            "share an api_key",
        ),
        (
            '[[accounts]]\nname = "a"\napi_key = "k"\napi_secret = "s"\nbalances = { USDT = "-1" }',
            "not a non-negative decimal",
        ),
        ("not toml [", "not valid TOML"),
    ],
)
def test_mistakes_are_refused_with_a_message(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "venue.toml"
    path.write_text(text)
    with pytest.raises(PaperVenueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_config(path)


def test_a_bad_fault_in_the_config_stops_the_venue_before_it_serves(tmp_path: Path) -> None:
    path = tmp_path / "venue.toml"
    path.write_text('[[faults]]\naction = "error"\n')
    with pytest.raises(PaperVenueError, match=r"\[\[faults\]\] 0 .*'accept'"):
        open_venue(tmp_path / "state", path)


def test_a_fresh_state_is_seeded_once(tmp_path: Path) -> None:
    venue = open_venue(tmp_path / "state", None)
    venue.exchange.set_balance("paper", "USDT", Decimal("1"))
    venue.exchange.store.close()
    again = open_venue(tmp_path / "state", None)
    assert ("USDT", Decimal("1"), Decimal("0")) in again.exchange.balances("paper")
    assert (tmp_path / "state" / "admin-token").stat().st_mode & 0o777 == 0o600
    again.exchange.store.close()


def test_a_config_that_is_not_utf8_is_refused_with_a_message(tmp_path: Path) -> None:
    path = tmp_path / "venue.toml"
    path.write_bytes(b'[[accounts]]\nname = "caf\xe9"\n')
    with pytest.raises(PaperVenueError, match=r"venue config .* is not UTF-8 text: byte 0xe9"):
        load_config(path)
