"""The cyclic collector's pause (streams/collector.py): off while held, back as it was after,
shared by holders, and cycles made meanwhile collected on the clock or after it, not lost."""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Iterator

import pytest

from streams import collector


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def a_cycle() -> weakref.ref[Node]:
    """A two-object cycle nobody refers to: only the cyclic collector frees it."""
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


@pytest.fixture(autouse=True)
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if was:
        gc.enable()  # also after a test that turned it off
    else:
        gc.disable()


def test_collection_is_off_inside_and_on_again_after() -> None:
    with collector.paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    with collector.paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_an_error_inside_still_turns_it_back_on() -> None:
    with pytest.raises(RuntimeError), collector.paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_it_stays_off_until_the_last_holder_leaves() -> None:
    outer = collector.paused()
    outer.__enter__()
    with collector.paused():
        assert not gc.isenabled()
    assert not gc.isenabled()  # the outer holder is still inside
    outer.__exit__(None, None, None)
    assert gc.isenabled()


def test_holders_in_two_threads_share_it() -> None:
    entered, leave = threading.Event(), threading.Event()

    def hold() -> None:
        with collector.paused():
            entered.set()
            leave.wait(10)

    other = threading.Thread(target=hold)
    other.start()
    assert entered.wait(10)
    with collector.paused():
        assert not gc.isenabled()
    assert not gc.isenabled()  # the other thread still holds it
    leave.set()
    other.join(10)
    assert gc.isenabled()


def test_a_cycle_made_inside_waits_for_the_tick_that_is_due() -> None:
    now = [0.0]
    with collector.paused(every_s=30.0, clock=lambda: now[0]) as pause:
        cycle = a_cycle()
        held: list[list[int]] = [[] for _ in range(5000)]  # enough to collect, were it on
        pause.tick()
        assert cycle() is not None  # not due yet: nothing collected
        now[0] = 29.9
        pause.tick()
        assert cycle() is not None and pause.collections == 0
        now[0] = 30.0
        pause.tick()
        assert cycle() is None and pause.collections == 1
        later = a_cycle()
        now[0] = 45.0
        pause.tick()
        assert later() is not None  # the interval counts from the last collection
    assert later() is not None  # leaving collects nothing itself...
    held.extend([] for _ in range(5000))
    assert later() is None  # ...the collector, on again, finds it at its next allocations
