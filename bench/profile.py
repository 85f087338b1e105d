"""A py-spy profile of a running process, kept as text: the top frames by share of samples.

:class:`Profiler` attaches ``py-spy record --format raw`` (collapsed stacks) to a pid and,
on :meth:`Profiler.stop` (SIGINT, which py-spy answers by writing its file), returns the raw
text; :func:`top_frames` (pure) turns that into the lines a note keeps: for each function,
the share of samples it was on the stack (inclusive) and on top of it (self).

py-spy is optional (``pip install py-spy``); :func:`available` says whether it is here.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^():]*)(?::\d+)?\)$")


def py_spy() -> str | None:
    here = Path(sys.executable).with_name("py-spy")
    return str(here) if here.exists() else shutil.which("py-spy")


def available() -> bool:
    return py_spy() is not None


def _frame_name(frame: str, root: str) -> str:
    found = _FRAME.match(frame.strip())
    if not found:
        return frame.strip()
    path = found["file"]
    for prefix in (root.rstrip("/") + "/", "/"):
        if "site-packages/" in path:
            path = path.split("site-packages/", 1)[1]
            break
        if path.startswith(prefix):
            path = path[len(prefix) :]
            break
    return f"{found['func']} ({path})"


def top_frames(raw: str, limit: int = 15, root: str = "") -> str:
    """The ``limit`` functions with the largest self share of samples, then those with the
    largest inclusive share, as lines ``  27.1% incl  12.0% self  decide (path/of/module.py)``."""
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_frame_name(f, root) for f in stack.split(";") if f]
        frames = [f for f in frames if not f.startswith(("process ", "thread "))]
        if not frames:
            continue
        total += count
        for name in set(frames):
            inclusive[name] += count
        own[frames[-1]] += count
    if not total:
        return "  (no samples)"
    lines = [f"  {total:,} samples. By share on top of the stack (self):"]
    lines += [_line(n, inclusive, own, total) for n, _ in own.most_common(limit)]
    lines.append("  By share on the stack (incl), interpreter start-up frames left out:")
    wanted = (n for n, _ in inclusive.most_common() if not n.endswith(_WRAPPERS))
    lines += [_line(n, inclusive, own, total) for n, _ in zip(wanted, range(limit), strict=False)]
    return "\n".join(lines)


_WRAPPERS = ("(<frozen runpy>)", "(sluicegate/cli.py)", "(<frozen importlib._bootstrap>)")


def _line(name: str, inclusive: Counter[str], own: Counter[str], total: int) -> str:
    return f"  {inclusive[name] / total:6.1%} incl {own[name] / total:6.1%} self  {name}"


class Profiler:
    """``py-spy record`` attached to ``pid`` until :meth:`stop`."""

    def __init__(self, pid: int, rate: int = 100) -> None:
        binary = py_spy()
        if binary is None:
            raise RuntimeError("py-spy is not installed (pip install py-spy)")
        self._out = Path(tempfile.mkstemp(prefix="bench-profile-", suffix=".txt")[1])
        self._child = subprocess.Popen(
            [
                binary,
                "record",
                "--pid",
                str(pid),
                "--rate",
                str(rate),
                "--format",
                "raw",
                "--nonblocking",
                "--output",
                str(self._out),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def stop(self) -> str:
        """Stop sampling; the raw collapsed stacks ("" if py-spy wrote nothing)."""
        self._child.send_signal(signal.SIGINT)
        try:
            self._child.wait(60)
        except subprocess.TimeoutExpired:
            self._child.kill()
            self._child.wait()
        try:
            return self._out.read_text()
        finally:
            self._out.unlink(missing_ok=True)
