"""A process with a store open gives memory freed on any thread back to the system
(``streams/engine/heap.py``: :class:`~streams.engine.heap.Release`).

Each case runs in a fresh interpreter: glibc's arenas are process-wide.
"""

from __future__ import annotations

import ctypes.util
import subprocess
import sys
from pathlib import Path

import pytest

from streams.engine import heap
from streams.engine.store import PartitionStore

pytestmark = pytest.mark.skipif(
    ctypes.util.find_library("c") != "libc.so.6", reason="glibc's malloc only"
)


# Another thread frees 64 KiB blocks (below the mmap threshold, so they come from its
# arena) between small ones it keeps (so the arena cannot shrink from its top): RocksDB's
# compaction threads leave their arenas so. With a store open, is that memory back with the
# system soon after, without anyone calling anything?
FRAGMENTED = """
import ctypes, sys, tempfile, threading, time
from pathlib import Path
from streams.engine import heap
from streams.engine.store import PartitionStore
heap.RELEASE_EVERY_S = 0.05
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
def rss_kib():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
store = None
if sys.argv[1] == "open":
    store = PartitionStore(Path(tempfile.mkdtemp()) / "p0", fresh=True)
kept = []
peak = []
def churn():
    big = []
    for _ in range(1600):
        block = libc.malloc(64 * 1024); ctypes.memset(block, 1, 64 * 1024); big.append(block)
        kept.append(libc.malloc(64))
    peak.append((rss_kib() - before) // 1024)
    for block in big:
        libc.free(block)
before = rss_kib()
worker = threading.Thread(target=churn); worker.start(); worker.join()
give_up = time.monotonic() + 5.0
while time.monotonic() < give_up and (rss_kib() - before) // 1024 > 10:
    time.sleep(0.05)
print(peak[0], (rss_kib() - before) // 1024)
if store is not None:
    store.close()
"""


def _fragmented(mode: str) -> tuple[int, int]:
    """(MiB the churn made resident before it freed, MiB still resident up to 5 s after).

    The first is read before the frees, not after them: the release thread (every 50 ms
    here) may already have returned the memory by the time the churn thread has joined,
    which made a measurement after the frees read 4 MiB once on a busy machine."""
    done = subprocess.run(
        [sys.executable, "-c", FRAGMENTED, mode], capture_output=True, text=True, check=True
    )
    resident, later = done.stdout.split()
    return int(resident), int(later)


def test_while_a_store_is_open_freed_heap_goes_back_to_the_system_within_moments() -> None:
    resident, later = _fragmented("open")
    assert resident >= 90, "the churn should have made about 100 MiB resident"
    assert later <= 10


def test_without_one_it_stays_in_the_arena_which_is_why_stores_release_it() -> None:
    resident, later = _fragmented("none")
    assert resident >= 90
    assert later >= 90


def test_a_store_holds_the_release_while_open_and_once(tmp_path: Path) -> None:
    before = heap.RELEASE.holders
    store = PartitionStore(tmp_path / "p0", fresh=True)
    assert heap.RELEASE.holders == before + 1
    store.close()
    store.close()
    assert heap.RELEASE.holders == before
