"""What counts as text for ids, keys, settings and files (``streams/text.py``).

Python decodes the bytes of an argument or an environment variable that are not UTF-8 into
lone surrogates (``surrogateescape``), and PostgreSQL text cannot hold NUL: a value with
either can be neither sent to Kafka as a string nor looked up in the projection.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.text import NotText, not_text, parse_whole, read_text_file


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("\udcff\udcfe", "byte 0xff at position 0 is not UTF-8"),
        ("run-\udce9", "byte 0xe9 at position 4 is not UTF-8"),
        ("a\x00b", "a NUL character at position 1"),
        ("x\ud800", "a lone surrogate (U+D800) at position 1"),
    ],
)
def test_what_is_not_text_is_named_with_its_position(value: str, said: str) -> None:
    assert not_text(value) == said


@pytest.mark.parametrize("value", ["", "run-8ed3", "paper|account=a%7Cb", "Grüße ₿ 🚀", "\t\n"])
def test_text_is_text(value: str) -> None:
    assert not_text(value) is None


@given(st.text())
def test_text_is_exactly_what_utf8_encodes_without_nul(value: str) -> None:
    try:
        value.encode("utf-8")
        encodes = True
    except UnicodeEncodeError:
        encodes = False
    assert (not_text(value) is None) == (encodes and "\x00" not in value)


def test_a_file_that_is_not_utf8_is_refused_naming_line_column_and_byte(tmp_path: Path) -> None:
    path = tmp_path / "w.toml"
    path.write_bytes(b'[[workflow]]\nsubscription = "caf\xe9"\n')
    with pytest.raises(NotText) as raised:
        read_text_file(path)
    assert str(raised.value) == (
        f"{path} is not UTF-8 text: byte 0xe9 at line 2, column 20; save it as UTF-8"
    )


def test_a_utf8_file_is_read_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "w.toml"
    path.write_text('subscription = "Grüße"\r\n', encoding="utf-8")
    assert read_text_file(path) == 'subscription = "Grüße"\r\n'


def test_a_missing_file_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_text_file(tmp_path / "missing.toml")


@pytest.mark.parametrize(
    "text", ["", "\u00b2", "\uff11", "\u0661", "12\n", " 1", "-1", "+1", "1.0", "1_0", "1" * 21]
)
def test_a_whole_number_is_ascii_digits_only(text: str) -> None:
    assert parse_whole(text, 10**30) is None


def test_a_whole_number_is_bounded() -> None:
    assert parse_whole("0", 1) == 0
    assert parse_whole("0065535", 65535) == 65535
    assert parse_whole("65536", 65535) is None


@given(st.text(max_size=30))
def test_parse_whole_never_raises_and_agrees_with_int_on_ascii_digits(text: str) -> None:
    value = parse_whole(text, 10**20)
    ascii_digits = text.isascii() and text.isdigit() and len(text) <= 20
    assert value == (int(text) if ascii_digits else None)
