"""bench.cpu: CPU seconds read from /proc, PostgreSQL's summed over its processes."""

from __future__ import annotations

import os
import time
from pathlib import Path

from bench.cpu import (
    CpuMeter,
    cpu_seconds,
    of_pid,
    postgres_cpu_seconds,
    summed,
    wait_seconds,
)


def _process(proc: Path, pid: int, comm: str, utime: int, stime: int, *, cutime: int = 0) -> None:
    # Fields after the command name: state, ppid, ..., utime is the 12th, cstime the 15th.
    after = ["S", "1", *["0"] * 9, str(utime), str(stime), str(cutime), "0", "20", "0"]
    (proc / str(pid)).mkdir()
    (proc / str(pid) / "stat").write_text(f"{pid} ({comm}) {' '.join(after)}\n")


def test_postgres_cpu_sums_every_postgres_process_and_its_exited_children(tmp_path: Path) -> None:
    ticks = os.sysconf("SC_CLK_TCK")
    _process(tmp_path, 10, "postgres", 2 * ticks, ticks, cutime=3 * ticks)  # the postmaster
    _process(tmp_path, 11, "postgres", ticks, 0)  # a backend
    _process(tmp_path, 12, "python3 (x)", 50 * ticks, 0)  # not PostgreSQL, odd name
    (tmp_path / "self").mkdir()
    assert postgres_cpu_seconds(tmp_path) == 7.0


def test_no_postgres_process_reads_as_unknown_not_zero(tmp_path: Path) -> None:
    _process(tmp_path, 12, "java", 5, 0)
    assert postgres_cpu_seconds(tmp_path) is None
    assert postgres_cpu_seconds(tmp_path / "absent") is None


def test_a_meter_reports_what_each_part_used_and_leaves_out_unreadable_ones() -> None:
    clock = {"a": 1.0, "b": 5.0}
    meter = CpuMeter({"a": lambda: clock["a"], "b": lambda: clock["b"], "gone": of_pid(None)})
    meter.start()
    clock["a"], clock["b"] = 1.5, 7.0
    assert meter.seconds() == {"a": 0.5, "b": 2.0}


def test_summed_readers_add_up_and_one_unreadable_makes_the_sum_unknown() -> None:
    figures: dict[str, float | None] = {"a": 1.5, "b": 2.0}
    total = summed([lambda: figures["a"], lambda: figures["b"]])
    assert total() == 3.5
    figures["b"] = None  # one process of the group is gone: no partial sum passed off as all
    assert total() is None


def test_own_cpu_seconds_grow_while_working() -> None:
    before = cpu_seconds(os.getpid())
    assert before is not None
    deadline = time.process_time() + 0.05
    while time.process_time() < deadline:
        pass
    after = cpu_seconds(os.getpid())
    assert after is not None and after > before


def _thread(proc: Path, pid: int, tid: int, ran_ns: int, waited_ns: int) -> None:
    task = proc / str(pid) / "task" / str(tid)
    task.mkdir(parents=True)
    (task / "schedstat").write_text(f"{ran_ns} {waited_ns} 17\n")


def test_the_wait_for_a_cpu_sums_a_process_threads_or_reads_its_main_thread(
    tmp_path: Path,
) -> None:
    _thread(tmp_path, 40, 40, 9_000_000_000, 1_500_000_000)  # the main thread
    _thread(tmp_path, 40, 41, 1_000_000_000, 250_000_000)
    assert wait_seconds(40, proc=tmp_path) == 1.75
    assert wait_seconds(40, main_thread=True, proc=tmp_path) == 1.5
    assert wait_seconds(41, proc=tmp_path) is None  # not a process here
    (tmp_path / "40" / "task" / "41" / "schedstat").write_text("")  # no such figures
    assert wait_seconds(40, proc=tmp_path) is None


def test_own_wait_for_a_cpu_is_read_from_this_machine() -> None:
    main = wait_seconds(os.getpid(), main_thread=True)  # first: the sum read after it
    waited = wait_seconds(os.getpid())
    assert main is not None and waited is not None and 0.0 <= main <= waited
