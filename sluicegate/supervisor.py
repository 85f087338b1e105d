"""``sluicegate serve``: every component as a child process, restarted when it dies.

Each component is its own ``sluicegate <component>`` process, so a crash of one (or a
``kill -9`` in a drill) is contained and the exactly-once machinery of that component is what
recovers it. Restarts back off from 1 s to 30 s. SIGTERM or Ctrl-C stops every child (SIGTERM,
then SIGKILL after 15 s) and returns.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

from sluicegate.config import Settings
from sluicegate.errors import SluicegateError

# In start order: the processor before the front door, so the first delivery finds it.
COMPONENTS = ("processor", "projector", "worker", "ingest")


@dataclass
class _Child:
    name: str
    process: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    next_start: float = 0.0


def serve(
    settings: Settings, only: list[str] | None = None, stop: threading.Event | None = None
) -> int:
    """Run the components until SIGTERM/SIGINT (or ``stop``), restarting any that exits."""
    components = list(COMPONENTS)
    if only:
        unknown = sorted(set(only) - set(components))
        if unknown:
            raise SluicegateError(
                f"unknown component(s) {', '.join(unknown)}; choose from {', '.join(components)}"
            )
        components = [c for c in components if c in only]
    children = [_Child(name) for name in components]
    stopping = stop or threading.Event()

    def on_signal(_signum: int, _frame: object) -> None:
        stopping.set()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
    print(
        f"sluicegate serve: {', '.join(components)} (Kafka {settings.kafka}, "
        f"prefix {settings.topic_prefix!r}, HTTP {settings.http_host}:{settings.http_port})",
        file=sys.stderr,
        flush=True,
    )
    try:
        while not stopping.is_set():
            now = time.monotonic()
            for child in children:
                if child.process is not None and child.process.poll() is not None:
                    code = child.process.returncode
                    child.restarts += 1
                    delay = min(2 ** min(child.restarts - 1, 5), 30)
                    print(
                        f"sluicegate serve: {child.name} exited with {code}; restart in {delay} s",
                        file=sys.stderr,
                        flush=True,
                    )
                    child.process = None
                    child.next_start = now + delay
                if child.process is None and now >= child.next_start:
                    child.process = subprocess.Popen(
                        [sys.executable, "-m", "sluicegate.cli", child.name]
                    )
            time.sleep(0.2)
    finally:
        _stop_all(children)
    return 0


def _stop_all(children: list[_Child]) -> None:
    running = [c.process for c in children if c.process is not None and c.process.poll() is None]
    for process in running:
        process.terminate()
    deadline = time.monotonic() + 15
    for process in running:
        try:
            process.wait(max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
