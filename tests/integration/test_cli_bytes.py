"""Bytes that are not UTF-8, where a shell lets an operator put them: arguments, environment
variables, files and standard input. Each gets one line saying what is wrong and where, and
loses nothing else; none gets a traceback.

The commands run in subprocesses with the bytes as they come from a terminal or a file saved
in Latin-1, under a UTF-8 locale (whose standard input is strict) as in the C locale.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from schemas.codec import decode
from schemas.commands import AdmitDelivery
from streams.kafka.topics import ensure_topics
from streams.settings import Settings
from tests.support.admission import EXAMPLE_WORKFLOW, candle
from tests.support.kafka import read_topic, unique_settings

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
LOCALES = ("C.UTF-8", "C")


def sluicegate(
    settings: Settings,
    *args: str | bytes,
    stdin: bytes | None = None,
    env: dict[str, str | bytes] | None = None,
    locale: str = "C.UTF-8",
) -> subprocess.CompletedProcess[bytes]:
    environment: dict[bytes, bytes] = {
        os.fsencode(k): os.fsencode(v)
        for k, v in {
            **os.environ,
            "SLUICEGATE_TOPIC_PREFIX": settings.topic_prefix,
            "LC_ALL": locale,
            **(env or {}),
        }.items()
    }
    return subprocess.run(
        [sys.executable.encode(), b"-m", b"sluicegate.cli", *map(os.fsencode, args)],
        cwd=ROOT,
        env=environment,
        input=stdin,
        capture_output=True,
        timeout=120,
        check=False,
    )


def one_line(err: bytes) -> str:
    text = err.decode("utf-8", "replace")
    assert "Traceback" not in text, text
    return text


@pytest.fixture()
def settings() -> Settings:
    s = unique_settings()
    ensure_topics(s)
    return s


@pytest.mark.parametrize(
    "args",
    [
        ("runs", "show", b"\xff\xfe"),
        ("runs", "rerun", "run-1", "--reason", b"caf\xe9"),
        ("occurrences", "show", b"\xff\xfe"),
        ("scopes", "show", b"paper|account=\xff"),
        ("holds", "resolve", "run-1.entry", "--reason", b"\xff"),
        ("recover", "--run", b"\xff\xfe"),
    ],
    ids=lambda a: " ".join(x for x in a[:2] if isinstance(x, str)),
)
def test_an_argument_that_is_not_utf8_is_a_usage_error(
    settings: Settings, args: tuple[str | bytes, ...]
) -> None:
    result = sluicegate(settings, *args)
    err = one_line(result.stderr)
    assert result.returncode == 2, err
    assert "error: argument " in err and "is not UTF-8" in err


@pytest.mark.parametrize("locale", LOCALES)
def test_a_setting_that_is_not_utf8_names_the_variable(settings: Settings, locale: str) -> None:
    result = sluicegate(
        settings, "topics", "ensure", env={"SLUICEGATE_KAFKA": b"\xff:9092"}, locale=locale
    )
    err = one_line(result.stderr)
    assert result.returncode == 1, err
    said = "sluicegate topics: SLUICEGATE_KAFKA: byte 0xff at position 0 is not UTF-8"
    assert err.startswith(said), err


def test_a_workflow_file_saved_in_latin1_applies_nothing_and_says_where(
    settings: Settings, tmp_path: Path
) -> None:
    latin1 = tmp_path / "btc.toml"
    text = EXAMPLE_WORKFLOW.read_bytes()
    latin1.write_bytes(text + b"# caf\xe9 (saved in Latin-1)\n")
    line = text.count(b"\n") + 1
    result = sluicegate(settings, "workflows", "apply", str(latin1))
    err = one_line(result.stderr)
    assert result.returncode == 1, err
    assert f"{latin1} is not UTF-8 text: byte 0xe9 at line {line}, column 6" in err
    assert read_topic(settings, settings.topic_named("workflows")) == []


@pytest.mark.parametrize("locale", LOCALES)
@pytest.mark.parametrize("source", ["file", "stdin"])
def test_publish_skips_a_line_that_is_not_utf8_and_publishes_the_others(
    settings: Settings, tmp_path: Path, source: str, locale: str
) -> None:
    assert sluicegate(settings, "workflows", "apply", str(EXAMPLE_WORKFLOW)).returncode == 0
    good = dict(candle(), subscription="btc-breakout", environment="paper")
    later = dict(good, candle_open="2026-11-30T12:01:00Z")
    bad = json.dumps(dict(good, candle_open="2026-11-30T12:02:00Z", rule="x")).encode()
    bad = bad.replace(b'"rule": "x"', b'"rule": "caf\xe9"')
    lines = json.dumps(good).encode() + b"\n" + bad + b"\n" + json.dumps(later).encode() + b"\n"
    if source == "file":
        path = tmp_path / "deliveries.jsonl"
        path.write_bytes(lines)
        result = sluicegate(settings, "publish", "--json", str(path), locale=locale)
        name = str(path)
    else:
        result = sluicegate(settings, "publish", "--json", stdin=lines, locale=locale)
        name = "stdin"
    err = one_line(result.stderr)
    assert result.returncode == 1, err
    column = bad.index(b"\xe9") + 1
    assert f"{name}:2: not UTF-8 text: byte 0xe9 at column {column}" in err
    assert "published 2 deliveries; 1 malformed line(s) skipped" in err
    assert [json.loads(x)["line"] for x in result.stdout.splitlines()] == [1, 3]
    produced = [
        decode(m.value() or b"") for m in read_topic(settings, settings.topic_named("deliveries"))
    ]
    assert len(produced) == 2 and all(isinstance(d, AdmitDelivery) for d in produced)
