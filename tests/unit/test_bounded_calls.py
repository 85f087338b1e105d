"""A driver call that never returns cannot wedge its caller (streams/engine/bounded.py)."""

from __future__ import annotations

import threading

import pytest

from streams.engine.bounded import BoundedCalls, CallHung


def test_a_call_returns_its_result_and_raises_its_exception_in_the_caller() -> None:
    calls = BoundedCalls()
    assert calls.call(lambda: 42, 5, "answering") == 42

    def refuse() -> None:
        raise ValueError("refused")

    with pytest.raises(ValueError, match="refused"):
        calls.call(refuse, 5, "refusing")
    assert calls.abandoned == 0


def test_a_call_that_does_not_return_is_left_behind_and_the_next_one_runs() -> None:
    calls = BoundedCalls()
    release = threading.Event()
    before = set(threading.enumerate())
    with pytest.raises(CallHung, match="blocking did not return within 0 s"):
        calls.call(release.wait, 0.2, "blocking")
    assert calls.abandoned == 1
    [left] = [t for t in set(threading.enumerate()) - before if t.name == "driver-call"]
    assert left.daemon and left.is_alive()  # still inside the call
    # The next call is served by a new helper thread.
    assert calls.call(threading.current_thread, 5, "naming") is not left
    release.set()  # the hung call returns at last, and its thread ends
    left.join(5)
    assert not left.is_alive()
    assert calls.call(lambda: "served", 5, "serving") == "served"
    assert calls.abandoned == 1
