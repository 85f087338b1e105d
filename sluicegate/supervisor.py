"""``sluicegate serve``: every component as a child process, restarted when it dies.

Each component is its own ``sluicegate <component>`` process, so a crash of one (or a
``kill -9`` in a drill) is contained and the exactly-once machinery of that component is what
recovers it. The paper venue (``sluicegate venue``) is one of them, started first, when the
gateway's venue is ``paper`` at a local URL (``SLUICEGATE_VENUE``, ``SLUICEGATE_VENUE_URL``).
Restarts back off from 1 s to 30 s. SIGTERM or Ctrl-C stops every child (SIGTERM,
then SIGKILL after 15 s) and returns.

With ``pid_file``, serve keeps a file of ``NAME PID`` lines: ``serve`` itself first, then each
component *that is running now*. It is rewritten (atomically: a reader never sees half of it)
within 0.2 s of a child starting or exiting, and removed when serve stops. It is how a
script signals one component (``kill -9 "$(awk '$1 == "processor" {print $2}' FILE)"``)
without matching process names, which could hit any process on the machine. A file that
names a live serve refuses a second one.

The children do not inherit ``SLUICEGATE_HEALTH``: it names one address, and the processor,
the gate and the gateway would each try to bind it (the second and third failing, restarted
forever). Run an engine instance on its own (``sluicegate processor --health ...``) to probe it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from consumers.gateway.settings import GatewaySettings
from consumers.ingest.settings import DEFAULT_READ_HTTP
from sluicegate.errors import SluicegateError
from streams.settings import Settings

# In start order: the processor and the gate before the front door, so the first delivery
# finds them.
COMPONENTS = ("processor", "gate", "gateway", "projector", "worker", "ingest")
VENUE = "venue"
"""Started first, and only when the gateway's venue is the paper venue on this machine."""


def components_for(gateway: GatewaySettings) -> list[str]:
    """What ``serve`` runs: :data:`COMPONENTS`, after the paper venue when it is local."""
    return ([VENUE] if gateway.local_paper else []) + list(COMPONENTS)


ONE_PER_PROCESS = ("SLUICEGATE_HEALTH",)
"""Settings that name something only one process can hold: left out of the children's
environment."""


def child_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """What a component started by ``serve`` gets: ``environ`` without :data:`ONE_PER_PROCESS`."""
    return {k: v for k, v in environ.items() if k not in ONE_PER_PROCESS}


def _command(name: str, gateway: GatewaySettings) -> list[str]:
    command = [sys.executable, "-m", "sluicegate.cli", name]
    if name == VENUE:
        command += ["--http", gateway.venue_listen]
    return command


@dataclass
class _Child:
    name: str
    process: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    next_start: float = 0.0


def serve(
    settings: Settings,
    only: list[str] | None = None,
    stop: threading.Event | None = None,
    pid_file: Path | None = None,
) -> int:
    """Run the components until SIGTERM/SIGINT (or ``stop``), restarting any that exits."""
    gateway = GatewaySettings.from_env()
    components = components_for(gateway)
    if only:
        unknown = sorted(set(only) - set(components))
        if unknown:
            raise SluicegateError(
                f"unknown component(s) {', '.join(unknown)}; choose from {', '.join(components)}"
            )
        components = [c for c in components if c in only]
    if pid_file is not None:
        _claim(pid_file)
    children = [_Child(name) for name in components]
    stopping = stop or threading.Event()

    def on_signal(_signum: int, _frame: object) -> None:
        stopping.set()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
    read_http = os.environ.get("SLUICEGATE_READ_HTTP", "").strip() or DEFAULT_READ_HTTP
    print(
        f"sluicegate serve: {', '.join(components)} (Kafka {settings.kafka}, "
        f"prefix {settings.topic_prefix!r}, webhook {settings.http_host}:{settings.http_port}, "
        f"read API {read_http})",
        file=sys.stderr,
        flush=True,
    )
    try:
        if pid_file is not None:
            _write_pids(pid_file, children)
        while not stopping.is_set():
            now = time.monotonic()
            changed = False
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
                    changed = True
                if child.process is None and now >= child.next_start:
                    child.process = subprocess.Popen(
                        _command(child.name, gateway), env=child_environment(os.environ)
                    )
                    changed = True
            if changed and pid_file is not None:
                _write_pids(pid_file, children)
            time.sleep(0.2)
    finally:
        _stop_all(children)
        if pid_file is not None:
            _release(pid_file)
    return 0


def _claim(pid_file: Path) -> None:
    owner = _pids(pid_file).get("serve")
    if owner is not None and owner != os.getpid() and _alive(owner):
        raise SluicegateError(
            f"{pid_file} belongs to a running sluicegate serve (pid {owner}); stop it first or "
            "give this one another --pid-file"
        )
    pid_file.parent.mkdir(parents=True, exist_ok=True)


def _write_pids(pid_file: Path, children: list[_Child]) -> None:
    lines = [f"serve {os.getpid()}"]
    lines += [f"{c.name} {c.process.pid}" for c in children if c.process is not None]
    temporary = pid_file.with_name(pid_file.name + ".tmp")
    temporary.write_text("\n".join(lines) + "\n")
    os.replace(temporary, pid_file)


def _release(pid_file: Path) -> None:
    if _pids(pid_file).get("serve") == os.getpid():
        with contextlib.suppress(FileNotFoundError):
            pid_file.unlink()


def _pids(pid_file: Path) -> dict[str, int]:
    try:
        text = pid_file.read_text()
    except FileNotFoundError:
        return {}
    found: dict[str, int] = {}
    for line in text.splitlines():
        name, _, pid = line.partition(" ")
        if pid.strip().isdigit():
            found[name] = int(pid)
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
