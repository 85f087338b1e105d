"""streams.engine.heap: large freed blocks go back to the system (glibc).

Each case runs in a fresh interpreter, since the setting is process-wide and one-way.
"""

from __future__ import annotations

import ctypes.util
import subprocess
import sys

import pytest

from streams.engine import heap

pytestmark = pytest.mark.skipif(
    ctypes.util.find_library("c") != "libc.so.6", reason="glibc's malloc only"
)

# A 1 MiB block is freed first (glibc's default then raises its threshold), then 100 more are
# allocated between long-lived small ones (which keep the heap from shrinking from its top)
# and freed: how many MiB stay resident?
CHILD = """
import ctypes, sys
from streams.engine.heap import map_large_blocks
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
if sys.argv[1] == "fixed":
    assert map_large_blocks() and map_large_blocks()
def rss_kib():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
MiB = 1 << 20
first = libc.malloc(MiB); ctypes.memset(first, 1, MiB); libc.free(first)
before = rss_kib()
big, small = [], []
for _ in range(100):
    block = libc.malloc(MiB); ctypes.memset(block, 1, MiB); big.append(block)
    small.append(libc.malloc(64))
for block in big:
    libc.free(block)
print((rss_kib() - before) // 1024)
"""


def _kept_mib(mode: str) -> int:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, mode], capture_output=True, text=True, check=True
    )
    return int(done.stdout)


def test_with_a_fixed_threshold_freed_large_blocks_leave_the_process() -> None:
    assert _kept_mib("fixed") <= 10


def test_with_glibcs_default_they_stay_resident_which_is_why_the_engine_fixes_it() -> None:
    assert _kept_mib("default") >= 90


def test_the_threshold_is_glibcs_own_starting_point() -> None:
    assert heap.MMAP_THRESHOLD == 128 * 1024
