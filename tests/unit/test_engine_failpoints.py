"""Failpoints: parsed strictly, matched on type and fields, and a real SIGKILL/SIGSTOP."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from streams.engine.failpoints import FailpointError, Failpoints, from_env, parse

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class AttemptStarted:
    slot: str
    attempt: int


def test_unset_means_none_armed() -> None:
    assert not from_env({})
    assert not parse(" , ")
    Failpoints().check("after_commit", [AttemptStarted("entry", 1)])  # nothing happens


@pytest.mark.parametrize(
    "text",
    [
        "after_commit",
        "after_commit:",
        "during_commit:AttemptStarted",
        "after_commit:AttemptStarted!explode",
        "after_commit:AttemptStarted[slot]",
        "after_commit:Attempt Started",
    ],
)
def test_malformed_entries_are_refused_with_the_variable_named(text: str) -> None:
    with pytest.raises(FailpointError, match="SLUICEGATE_FAILPOINTS"):
        parse(text)


def test_matching_on_type_and_every_field() -> None:
    [failpoint] = parse("after_commit:AttemptStarted[slot=entry][attempt=2]!stop")._armed
    assert (failpoint.point, failpoint.action) == ("after_commit", "stop")
    assert failpoint.matches(AttemptStarted("entry", 2))
    assert not failpoint.matches(AttemptStarted("entry", 1))
    assert not failpoint.matches(AttemptStarted("protection", 2))
    assert not failpoint.matches(object())


def _child(code: str) -> subprocess.Popen[bytes]:
    prelude = (
        "from dataclasses import dataclass\n"
        "from streams.engine.failpoints import parse\n"
        "@dataclass\nclass AttemptStarted:\n    slot: str\n"
    )
    return subprocess.Popen([sys.executable, "-c", prelude + code], cwd=ROOT)


def test_a_failpoint_kills_its_own_process_with_sigkill_once_it_matches() -> None:
    child = _child(
        "armed = parse('after_commit:AttemptStarted[slot=entry]')\n"
        "armed.check('before_commit', [AttemptStarted('entry')])\n"  # other point: nothing
        "armed.check('after_commit', [AttemptStarted('exit')])\n"  # no match: nothing
        "armed.check('after_commit', [AttemptStarted('entry')])\n"
        "raise SystemExit(3)\n"
    )
    assert child.wait(30) == -signal.SIGKILL


def test_a_stop_failpoint_freezes_the_process_until_sigcont_and_fires_once() -> None:
    child = _child(
        "armed = parse('before_send:AttemptStarted!stop')\n"
        "armed.check('before_send', [AttemptStarted('entry')])\n"
        "armed.check('before_send', [AttemptStarted('entry')])\n"  # fired already: no stop
        "raise SystemExit(7)\n"
    )
    deadline = time.monotonic() + 30
    while True:
        _, status = os.waitpid(child.pid, os.WUNTRACED | os.WNOHANG)
        if status and os.WIFSTOPPED(status):
            break
        assert time.monotonic() < deadline, "the child never stopped"
        time.sleep(0.02)
    os.kill(child.pid, signal.SIGCONT)
    assert child.wait(30) == 7


def test_a_stop_freezes_the_thread_that_fired_it_before_it_runs_on(tmp_path: Path) -> None:
    """The gateway's effect threads fire ``before_send`` while other threads run: the firing
    thread must not reach its send while the process is (being) stopped."""
    ran_on = 0
    for n in range(8):
        marks = tmp_path / f"marks-{n}"
        child = _child(
            "import threading, time\n"
            f"marks = open({str(marks)!r}, 'w', buffering=1)\n"
            "def busy():\n"
            "    while True:\n"
            "        pass\n"
            "def effect():\n"
            "    parse('before_send:AttemptStarted!stop').check("
            "'before_send', [AttemptStarted('entry')])\n"
            "    marks.write('sent\\n')\n"
            "for target in (busy, busy, effect):\n"
            "    threading.Thread(target=target, daemon=True).start()\n"
            "time.sleep(60)\n"
        )
        try:
            deadline = time.monotonic() + 30
            while True:
                _, status = os.waitpid(child.pid, os.WUNTRACED | os.WNOHANG)
                if status and os.WIFSTOPPED(status):
                    break
                assert time.monotonic() < deadline, "the child never stopped"
                time.sleep(0.02)
            time.sleep(0.1)
            ran_on += "sent" in marks.read_text()
        finally:
            os.kill(child.pid, signal.SIGKILL)
            os.kill(child.pid, signal.SIGCONT)
            child.wait(30)
    assert ran_on == 0, f"in {ran_on} of 8 stops the firing thread ran on past the stop"
