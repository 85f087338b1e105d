"""The heartbeat a component sends ``sluicegate serve``: on a real pipe, with a controlled clock."""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

from streams import heartbeat
from streams.heartbeat import Heartbeat


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture()
def pipe() -> Iterator[tuple[int, int]]:
    read, write = os.pipe()
    os.set_blocking(read, False)
    yield read, write
    for fd in (read, write):
        with contextlib.suppress(OSError):  # the heartbeat closed its end
            os.close(fd)


def beats_in(read: int) -> int:
    try:
        return len(os.read(read, 1 << 16))
    except BlockingIOError:
        return 0


def test_beats_at_most_every_half_interval(pipe: tuple[int, int]) -> None:
    read, write = pipe
    clock = Clock()
    heart = Heartbeat(write, clock=clock)
    heart.beat()
    heart.beat()  # same instant: dropped
    clock.now += heartbeat.MIN_GAP_S * 0.9
    heart.beat()
    assert beats_in(read) == 1
    clock.now += heartbeat.MIN_GAP_S * 0.2
    heart.beat()
    assert beats_in(read) == 1
    assert heart.beats == 2


def test_a_full_pipe_drops_beats_without_blocking(pipe: tuple[int, int]) -> None:
    read, write = pipe
    clock = Clock()
    heart = Heartbeat(write, clock=clock)
    os.set_blocking(write, False)
    while True:  # fill it, as a supervisor that stopped reading would let it fill
        try:
            os.write(write, b"x" * 4096)
        except BlockingIOError:
            break
    for _ in range(3):
        clock.now += heartbeat.INTERVAL_S
        heart.beat()  # would hang the component if it blocked
    assert heart.beats == 0 and not heart.closed
    os.read(read, 1 << 20)
    clock.now += heartbeat.INTERVAL_S
    heart.beat()
    assert heart.beats == 1


def test_a_supervisor_gone_ends_the_heartbeat_quietly(pipe: tuple[int, int]) -> None:
    read, write = pipe
    clock = Clock()
    heart = Heartbeat(write, clock=clock)
    os.close(read)
    heart.beat()  # EPIPE: never raised to the component
    assert heart.closed
    clock.now += heartbeat.INTERVAL_S
    heart.beat()
    assert heart.beats == 0


@pytest.mark.parametrize("value", ["", "  ", "abc", "-3", "3.5", "\u00b2", "9" * 5000])
def test_no_heartbeat_without_a_descriptor(value: str) -> None:
    assert Heartbeat.from_environment({heartbeat.ENV: value}) is None
    assert Heartbeat.from_environment({}) is None


def test_no_heartbeat_on_a_closed_descriptor_or_a_file(tmp_path: os.PathLike[str]) -> None:
    read, write = os.pipe()
    os.close(read)
    os.close(write)
    assert Heartbeat.from_environment({heartbeat.ENV: str(write)}) is None
    with open(os.path.join(tmp_path, "f"), "wb") as f:
        assert Heartbeat.from_environment({heartbeat.ENV: str(f.fileno())}) is None


def test_the_descriptor_the_environment_names_is_used(pipe: tuple[int, int]) -> None:
    read, write = pipe
    heart = Heartbeat.from_environment({heartbeat.ENV: str(write)})
    assert heart is not None and heart.fd == write
    heart.beat()
    assert beats_in(read) == 1


def test_the_process_environment_keeps_no_descriptor_for_its_children(
    pipe: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, write = pipe
    monkeypatch.setenv(heartbeat.ENV, str(write))
    heart = Heartbeat.from_environment()
    assert heart is not None and heart.fd == write
    assert heartbeat.ENV not in os.environ


def wait_readable(fd: int, timeout_s: float) -> bool:
    return bool(select.select([fd], [], [], timeout_s)[0])


def test_keep_beating_beats_only_while_the_work_is_alive(pipe: tuple[int, int]) -> None:
    read, write = pipe
    heart = Heartbeat(write)
    alive = threading.Event()
    stop = threading.Event()
    thread = heart.keep_beating(alive.is_set, stop)
    try:
        # Not alive: three intervals pass without a beat.
        assert not wait_readable(read, 3 * heartbeat.INTERVAL_S)
        alive.set()
        assert wait_readable(read, 3 * heartbeat.INTERVAL_S)
        assert beats_in(read) >= 1
    finally:
        stop.set()
        thread.join(5)
    assert not thread.is_alive()


def test_a_failing_liveness_check_counts_as_not_alive(pipe: tuple[int, int]) -> None:
    read, write = pipe
    heart = Heartbeat(write)
    stop = threading.Event()

    def broken() -> bool:
        raise RuntimeError("status unreadable")

    thread = heart.keep_beating(broken, stop)
    try:
        assert not wait_readable(read, 2.5 * heartbeat.INTERVAL_S)
        assert thread.is_alive()
    finally:
        stop.set()
        thread.join(5)


def test_beat_async_beats_from_the_loop_and_ends_with_stop(pipe: tuple[int, int]) -> None:
    read, write = pipe
    heart = Heartbeat(write)

    async def scenario() -> int:
        stop = asyncio.Event()
        task = asyncio.create_task(heart.beat_async(stop))
        await asyncio.sleep(0)  # let it beat once
        first = beats_in(read)
        stop.set()
        await asyncio.wait_for(task, 5)
        return first

    assert asyncio.run(scenario()) == 1


_REPORT_DEATH_SIGNAL = """
import ctypes, os, sys
from streams import heartbeat
alive = heartbeat.stop_with_supervisor()
signal = ctypes.c_int()
ctypes.CDLL(None).prctl(2, ctypes.byref(signal), 0, 0, 0)  # PR_GET_PDEATHSIG
print(alive, signal.value, heartbeat.SUPERVISOR_ENV in os.environ)
"""


def _child_reports(supervisor: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != heartbeat.SUPERVISOR_ENV}
    if supervisor is not None:
        env[heartbeat.SUPERVISOR_ENV] = supervisor
    done = subprocess.run(
        [sys.executable, "-c", _REPORT_DEATH_SIGNAL],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return done.stdout.strip()


def test_a_child_of_serve_asks_for_sigterm_when_serve_dies_and_forgets_the_variable() -> None:
    assert _child_reports(str(os.getpid())) == f"True {int(signal.SIGTERM)} False"


def test_a_child_whose_serve_is_gone_says_so() -> None:
    assert _child_reports(str(2**31 - 1)) == f"False {int(signal.SIGTERM)} False"


@pytest.mark.parametrize("value", [None, "", "\u00b2", "abc"])
def test_a_process_not_started_by_serve_asks_for_nothing(value: str | None) -> None:
    assert _child_reports(value) == "True 0 False"
