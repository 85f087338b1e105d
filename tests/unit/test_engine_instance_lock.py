"""The instance lock on its own: who holds it, what the refusal says, when it is free again.

Across processes (a frozen holder, one killed with SIGKILL) it is drilled with real
``sluicegate processor`` processes in ``tests/integration/test_instance_lock.py``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from streams.engine.instance_lock import LOCK_FILE, InstanceLock
from streams.errors import InstanceAlreadyRunning, StateStoreFailed
from tests.support.fresh_interpreter import run_script


def test_a_second_lock_on_the_same_directory_is_refused_until_the_first_is_released(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "admission" / "p1"
    first = InstanceLock(directory, "admission/p1")
    first.acquire()
    assert first.held
    assert (directory / LOCK_FILE).read_text() == f"{os.getpid()}\n"

    second = InstanceLock(directory, "admission/p1")
    with pytest.raises(InstanceAlreadyRunning) as refused:
        second.acquire()
    message = str(refused.value)
    assert message.startswith("admission/p1 is already running on this host: ")
    assert f"pid {os.getpid()} (this process) holds its state directory {directory}" in message
    assert "another --instance-id" in message and "kill -9" in message
    assert not second.held

    first.release()
    assert not first.held
    second.acquire()  # the file stays; the lock was the open file's
    assert second.held
    second.release()
    second.release()  # releasing what is not held is nothing


def test_acquiring_twice_in_one_lock_is_one_hold(tmp_path: Path) -> None:
    lock = InstanceLock(tmp_path, "gate/g1")
    lock.acquire()
    lock.acquire()
    lock.release()
    InstanceLock(tmp_path, "gate/g1").acquire()


def test_other_instance_ids_do_not_share_a_lock(tmp_path: Path) -> None:
    one = InstanceLock(tmp_path / "admission" / "p1", "admission/p1")
    two = InstanceLock(tmp_path / "admission" / "p2", "admission/p2")
    one.acquire()
    two.acquire()
    assert one.held and two.held


def test_a_holder_whose_pid_cannot_be_read_is_named_as_another_process(tmp_path: Path) -> None:
    first = InstanceLock(tmp_path, "admission/p1")
    first.acquire()
    for written in ("", "\u00b2", "12 34", "x" * 100):  # not a pid: nothing to name
        (tmp_path / LOCK_FILE).write_text(written)
        with pytest.raises(InstanceAlreadyRunning, match="another process holds its state"):
            InstanceLock(tmp_path, "admission/p1").acquire()


def test_a_state_directory_that_cannot_be_created_is_a_store_failure(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    lock = InstanceLock(blocker / "admission" / "p1", "admission/p1")
    with pytest.raises(StateStoreFailed, match=r"cannot open its lock file .*SLUICEGATE_STATE_DIR"):
        lock.acquire()


FULL_DISK = """
import json, resource, signal, sys
from pathlib import Path
from streams.engine.instance_lock import InstanceLock
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))  # no byte may be written, as on a full disk
lock = InstanceLock(Path(sys.argv[1]), "admission/p1")
lock.acquire()
print(json.dumps({"held": lock.held}))
"""


def test_a_pid_that_cannot_be_written_leaves_the_lock_held(tmp_path: Path) -> None:
    """On a full disk the file exists (a stale pid in it, or none) but cannot take ours: the
    lock holds all the same; only the next refusal cannot name us."""
    (tmp_path / LOCK_FILE).write_text("")
    assert run_script(FULL_DISK, str(tmp_path)) == {"held": True}
    assert (tmp_path / LOCK_FILE).read_text() == ""
