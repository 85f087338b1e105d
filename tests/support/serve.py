"""What the tests of ``sluicegate serve`` read from outside: its pid file and HTTP answers."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path


def pids_in(path: Path) -> dict[str, int]:
    """``sluicegate serve --pid-file``'s content: one ``NAME PID`` per line."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    return {name: int(pid) for name, pid in (line.split() for line in text.splitlines())}


def http_get(url: str) -> tuple[int, bytes] | None:
    """Status and body, or ``None`` while nothing listens there."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return int(response.status), bytes(response.read())
    except urllib.error.HTTPError as e:
        return int(e.code), bytes(e.read())
    except OSError:
        return None
