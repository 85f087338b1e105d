"""``sluicegate serve --pid-file``: whose file it is; and what the children inherit (the
running children are covered by ``tests/integration/test_serve.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from sluicegate.errors import SluicegateError
from sluicegate.supervisor import child_environment, serve
from streams.settings import Settings


def serve_in_a_thread(pid_file: Path) -> BaseException | None:
    """``serve`` with ``stop`` already set (so no child starts), off the main thread (so it
    installs no signal handlers in the test process); returns what it raised."""
    stop = threading.Event()
    stop.set()
    raised: list[BaseException] = []

    def target() -> None:
        try:
            serve(Settings(), only=["processor"], stop=stop, pid_file=pid_file)
        except BaseException as e:
            raised.append(e)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(30)
    return raised[0] if raised else None


def test_a_pid_file_of_a_running_serve_is_not_taken_over(tmp_path: Path) -> None:
    pid_file = tmp_path / "serve.pids"
    pid_file.write_text(f"serve {os.getppid()}\nprocessor 1\n")
    refused = serve_in_a_thread(pid_file)
    assert isinstance(refused, SluicegateError)
    assert str(os.getppid()) in str(refused)
    assert pid_file.read_text() == f"serve {os.getppid()}\nprocessor 1\n"


def test_a_stale_pid_file_is_replaced_and_removed_on_exit(tmp_path: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    pid_file = tmp_path / "run" / "serve.pids"
    pid_file.parent.mkdir()
    pid_file.write_text(f"serve {gone.pid}\n")
    assert serve_in_a_thread(pid_file) is None
    assert not pid_file.exists()


@pytest.mark.parametrize("content", ["", "garbage\n", "serve notapid\n"])
def test_an_unreadable_pid_file_is_replaced(tmp_path: Path, content: str) -> None:
    pid_file = tmp_path / "serve.pids"
    pid_file.write_text(content)
    assert serve_in_a_thread(pid_file) is None
    assert not pid_file.exists()


def test_the_children_do_not_share_one_health_address() -> None:
    """Three engine instances given one ``SLUICEGATE_HEALTH`` would race for its port."""
    environ = {"SLUICEGATE_HEALTH": "127.0.0.1:9464", "SLUICEGATE_KAFKA": "k:1", "PATH": "/bin"}
    assert child_environment(environ) == {"SLUICEGATE_KAFKA": "k:1", "PATH": "/bin"}
