"""Run a test's script in a fresh Python interpreter and read the JSON it prints last.

For measurements of what belongs to a whole process (RocksDB's block cache, glibc's heap):
in the test process, other tests' stores would share them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def run_script(script: str, *args: str, timeout: float = 300) -> dict[str, Any]:
    """Run ``script`` with ``args`` from the repository's root; the JSON object on its last
    line of output (a failing script raises, with its output)."""
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
        cwd=ROOT,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result
