"""Local checkpoints: read back as written, refused for anything else, and gone once taken."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.engine import checkpoint
from streams.engine.checkpoint import Changelog, Checkpoint, CheckpointError

NOW = 1_796_040_000_000
DAY = 86_400_000
WRITTEN = Checkpoint(
    changelog="p.changelog",
    partition=2,
    topic_id="a7G68W5NRg+B5uIcgFjONg",
    partitions=3,
    offset=1200,
    sequence=977,
    owner="toy/a",
    written_ms=NOW - 60_000,
)
CHANGELOG = Changelog("p.changelog", 2, "a7G68W5NRg+B5uIcgFjONg", 0, 1500, DAY)


def judged(cp: Checkpoint = WRITTEN, log: Changelog = CHANGELOG, **kw: object) -> str | None:
    args: dict[str, object] = {"partitions": 3, "owner": "toy/a", "now_ms": NOW, **kw}
    return checkpoint.judge(cp, log, **args)  # type: ignore[arg-type]


def test_written_then_taken_is_the_same_and_the_file_is_gone(tmp_path: Path) -> None:
    path = checkpoint.path_of(tmp_path / "p2")
    assert path == tmp_path / "p2.checkpoint"
    checkpoint.write(path, WRITTEN)
    assert checkpoint.take(path) == WRITTEN
    assert not path.exists()
    assert checkpoint.take(path) is None


def test_an_unreadable_checkpoint_is_deleted_too(tmp_path: Path) -> None:
    path = tmp_path / "p0.checkpoint"
    path.write_bytes(b"\x00garbage")
    with pytest.raises(CheckpointError):
        checkpoint.take(path)
    assert not path.exists()


def test_a_valid_checkpoint_is_trusted() -> None:
    assert judged() is None
    assert judged(replace(WRITTEN, offset=0)) is None
    assert judged(replace(WRITTEN, offset=1500)) is None


@pytest.mark.parametrize(
    ("changed", "why"),
    [
        ({"topic_id": "another"}, "deleted and created again"),
        ({"partition": 1}, "written for"),
        ({"changelog": "q.changelog"}, "written for"),
        ({"owner": "toy/b"}, "written by toy/b"),
        ({"partitions": 6}, "written with 6 partitions"),
        ({"offset": 1501}, "outside"),
        ({"written_ms": NOW - DAY}, "compacted away"),
        ({"written_ms": NOW + 1}, "compacted away"),
    ],
)
def test_anything_that_differs_is_not_trusted(changed: dict[str, object], why: str) -> None:
    reason = judged(replace(WRITTEN, **changed))  # type: ignore[arg-type]
    assert reason is not None and why in reason


def test_an_offset_below_the_low_watermark_is_not_trusted() -> None:
    assert judged(log=replace(CHANGELOG, low=1300)) is not None


def test_a_changelog_that_keeps_tombstones_briefly_never_trusts_one() -> None:
    assert judged(log=replace(CHANGELOG, delete_retention_ms=checkpoint.AGE_MARGIN_MS)) is not None


@settings(deadline=None)
@given(st.binary(max_size=600))
def test_any_bytes_are_a_checkpoint_or_a_checkpoint_error(raw: bytes) -> None:
    try:
        parsed = checkpoint.parse(raw)
    except CheckpointError:
        return
    assert isinstance(parsed, Checkpoint)


@settings(deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["format", *asdict(WRITTEN)]),
        st.one_of(st.integers(-5, 10**6), st.text(max_size=5), st.booleans(), st.none()),
    )
)
def test_damaged_fields_are_refused(fields: dict[str, object]) -> None:
    body = {"format": checkpoint.FORMAT, **asdict(WRITTEN), **fields}
    raw = json.dumps(body).encode()
    try:
        parsed = checkpoint.parse(raw)
    except CheckpointError:
        return
    assert parsed == Checkpoint(**{k: body[k] for k in asdict(WRITTEN)})
    assert body["format"] == checkpoint.FORMAT


def test_a_checkpoint_of_format_1_is_refused_so_its_store_is_restored_partitioned() -> None:
    # Format 1 stores have whole-file indexes (rocks.py): restored once rather than kept slow.
    format_1 = json.dumps({"format": 1, **asdict(WRITTEN)}).encode()
    with pytest.raises(CheckpointError, match="format 1: its store's files have whole-file"):
        checkpoint.parse(format_1)
    current = json.dumps({"format": checkpoint.FORMAT, **asdict(WRITTEN)}).encode()
    assert checkpoint.parse(current) == WRITTEN


def test_an_oversized_file_is_refused() -> None:
    with pytest.raises(CheckpointError):
        checkpoint.parse(b" " * (checkpoint.MAX_BYTES + 1))
