"""A py-spy raw profile becomes the top frames a note keeps (self and inclusive shares)."""

from __future__ import annotations

from bench.profile import top_frames

RAW = "\n".join(
    [
        "process 1:main;run (/repo/streams/engine/processor.py:10);"
        "decide (/repo/streams/core/admission/admit.py:40) 60",
        "process 1:main;run (/repo/streams/engine/processor.py:10);"
        "encode (/venv/lib/python3.11/site-packages/fastavro/write.py:7) 30",
        "process 1:main;run (/repo/streams/engine/processor.py:12) 10",
        "not a stack line",
    ]
)


def test_shares_are_of_all_samples_and_paths_are_shortened() -> None:
    text = top_frames(RAW, limit=3, root="/repo")
    lines = text.splitlines()
    assert lines[0] == "  100 samples. By share on top of the stack (self):"
    assert lines[1] == "   60.0% incl  60.0% self  decide (streams/core/admission/admit.py)"
    assert lines[2] == "   30.0% incl  30.0% self  encode (fastavro/write.py)"
    assert lines[3] == "  100.0% incl  10.0% self  run (streams/engine/processor.py)"
    assert "  100.0% incl  10.0% self  run (streams/engine/processor.py)" in lines[5:]


def test_no_samples() -> None:
    assert top_frames("") == "  (no samples)"
