"""``sluicegate serve``: every component as a child process, restarted when it dies or when
it stops beating (frozen or wedged).

Each component is its own ``sluicegate <component>`` process, so a crash of one (or a
``kill -9`` in a drill) is contained and the exactly-once machinery of that component is what
recovers it. The paper venue (``sluicegate venue``) is one of them, started first, when the
gateway's venue is ``paper`` at a local URL (``SLUICEGATE_VENUE``, ``SLUICEGATE_VENUE_URL``).
Restarts back off from 1 s to 30 s, doubling while a child keeps exiting within a minute of
its start; one that ran longer starts from 1 s again. SIGTERM or Ctrl-C stops every child
(SIGTERM, then SIGKILL after 15 s) and returns.

With ``pid_file``, serve keeps a file of ``NAME PID`` lines (``pid_file.py``): ``serve``
itself first, then each component that is running now.

Liveness (its arithmetic is ``restarts.py``): each child beats on a pipe
(``streams/heartbeat.py``) while it is worth keeping. A child from which no beat came for
the liveness window (``--liveness``, default ``$SLUICEGATE_SERVE_LIVENESS`` or 30 s;
``off`` switches it off; a child's first beat may take up to 60 s, ``FIRST_BEAT_S``) is
frozen (SIGSTOP) or wedged: serve kills it with SIGKILL and restarts it like any child
that died, so its exactly-once machinery (fencing, restore) takes over from where its last
transaction committed. An engine instance stops beating only once its own stall limit (60 s
or more) has passed, so a wedged engine loop is restarted that long plus the window after
it stopped coming round.

The children do not inherit ``SLUICEGATE_HEALTH``: it names one address, and the processor,
the gate and the gateway would each try to bind it (the second and third failing, restarted
forever). ``--health HOST:PORT`` (or ``$SLUICEGATE_SERVE_HEALTH``) gives each child that
serves probes (:data:`PROBED`) an address of its own instead: consecutive ports from PORT,
in the order :func:`components_for` lists them, whatever ``--only`` leaves out, so an
address always names the same component (:func:`health_addresses`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from consumers.gateway.settings import GatewaySettings
from consumers.ingest.settings import DEFAULT_READ_HTTP
from sluicegate import pid_file as pid_files
from sluicegate.errors import SluicegateError
from sluicegate.restarts import (
    DEFAULT_LIVENESS_S,
    back_off,
    overdue,
    silent_for,
)
from streams import heartbeat
from streams.settings import Settings
from streams.text import parse_whole

log = logging.getLogger("sluicegate.serve")

# In start order: the processor and the gate before the front door, so the first delivery
# finds them.
COMPONENTS = ("processor", "gate", "gateway", "projector", "worker", "ingest")
VENUE = "venue"
"""Started first, and only when the gateway's venue is the paper venue on this machine."""


PROJECTORS_ENV = "SLUICEGATE_SERVE_PROJECTORS"
PROJECTOR = "projector"
HEALTH_ENV = "SLUICEGATE_SERVE_HEALTH"
PROBED = ("processor", "gate", "gateway", PROJECTOR, "worker")
"""The components that take ``--health`` (the venue and the webhook answer on their own
listeners)."""


def components_for(gateway: GatewaySettings, projectors: int = 1) -> list[str]:
    """What ``serve`` runs: :data:`COMPONENTS`, after the paper venue when it is local; with
    ``projectors`` > 1, that many projectors named ``projector:K/N``, one share each."""
    names = [VENUE] if gateway.local_paper else []
    for name in COMPONENTS:
        if name == PROJECTOR and projectors > 1:
            names += [f"{PROJECTOR}:{k}/{projectors}" for k in range(projectors)]
        else:
            names.append(name)
    return names


def health_addresses(components: list[str], base: tuple[str, int]) -> dict[str, tuple[str, int]]:
    """The probes' address of each child of ``components`` that serves them: ``base``'s
    host, consecutive ports from ``base``'s; :class:`SluicegateError` if one would pass
    65535 or ``base`` has port 0 (each child would pick its own, and nobody could find it)."""
    host, port = base
    probed = [name for name in components if kind_of(name) in PROBED]
    if port == 0 or port + len(probed) - 1 > 65535:
        raise SluicegateError(
            f"health address {host}:{port}: {len(probed)} consecutive ports from a port "
            "above 0 are needed, one per component that serves probes"
        )
    return {name: (host, port + n) for n, name in enumerate(probed)}


def taken(addresses: Mapping[str, tuple[str, int]]) -> list[str]:
    """``NAME HOST:PORT (reason)`` for each address that cannot be bound now (another process
    listens there): a child given it would exit at once and be restarted for ever."""
    found = []
    for name, (host, port) in addresses.items():
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the probes' server
            try:
                probe.bind((host, port))
            except OSError as e:
                found.append(f"{name} {host}:{port} ({e.strerror or e})")
    return found


def kind_of(name: str) -> str:
    """The component a child name runs (``projector:0/2`` runs ``projector``)."""
    return name.partition(":")[0]


def parse_projectors(text: str) -> int:
    """How many projectors ``serve`` runs: a whole number from 1 to the most partitions any
    topic could sensibly have; :class:`SluicegateError` otherwise."""
    count = parse_whole(text.strip(), 64)
    if not count:
        raise SluicegateError(f"projectors {text!r}: a whole number from 1 to 64")
    return count


ONE_PER_PROCESS = ("SLUICEGATE_HEALTH", heartbeat.ENV, heartbeat.SUPERVISOR_ENV)
"""Settings that name something only one process can hold: left out of the children's
environment (each child gets a heartbeat descriptor of its own)."""


def child_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """What a component started by ``serve`` gets: ``environ`` without :data:`ONE_PER_PROCESS`."""
    return {k: v for k, v in environ.items() if k not in ONE_PER_PROCESS}


def _command(
    name: str, gateway: GatewaySettings, health: tuple[str, int] | None = None
) -> list[str]:
    kind, _, share = name.partition(":")
    command = [sys.executable, "-m", "sluicegate.cli", kind]
    if name == VENUE:
        command += ["--http", gateway.venue_listen]
    if share:
        command += ["--share", share]
    if health is not None:
        command += ["--health", f"{health[0]}:{health[1]}"]
    return command


@dataclass
class _Child:
    name: str
    process: subprocess.Popen[bytes] | None = None
    exits_in_a_row: int = 0
    """Exits since the child last ran ``STEADY_S`` (what its back-off doubles with)."""
    next_start: float = 0.0
    beats: int | None = None
    """The read end of the running process's heartbeat pipe."""
    started_at: float = 0.0
    heard_at: float | None = None
    killed: bool = False
    """Whether serve killed the running process for its silence (it has not been reaped)."""

    def start(self, command: list[str], now: float) -> None:
        read, write = os.pipe()
        os.set_blocking(read, False)
        try:
            self.process = subprocess.Popen(
                command,
                env={
                    **child_environment(os.environ),
                    heartbeat.ENV: str(write),
                    heartbeat.SUPERVISOR_ENV: str(os.getpid()),  # it stops when serve does
                },
                pass_fds=(write,),
            )
        except BaseException:
            os.close(read)
            raise
        finally:
            os.close(write)  # the child's copy is the only writer: its exit closes the pipe
        self.beats, self.started_at, self.heard_at, self.killed = read, now, None, False

    def listen(self, now: float) -> None:
        """Take the beats that arrived; a beat means the child was alive lately."""
        if self.beats is None:
            return
        with contextlib.suppress(BlockingIOError):
            while os.read(self.beats, 4096):
                self.heard_at = now

    def kill_if_silent(self, now: float, liveness_s: float) -> None:
        """SIGKILL the running process when it is :func:`overdue` (once: it is reaped, and
        restarted, on a later round)."""
        if self.process is None or self.killed:
            return
        if overdue(now, self.started_at, self.heard_at, liveness_s):
            silent = silent_for(now, self.started_at, self.heard_at)
            log.warning(
                "%s (pid %d) sent no heartbeat for %.0f s (frozen or wedged); killing it",
                self.name,
                self.process.pid,
                silent,
            )
            self.process.kill()
            self.killed = True

    def exited(self) -> None:
        self.process = None
        if self.beats is not None:
            os.close(self.beats)
            self.beats = None


def serve(
    settings: Settings,
    only: list[str] | None = None,
    stop: threading.Event | None = None,
    pid_file: Path | None = None,
    liveness_s: float | None = DEFAULT_LIVENESS_S,
    *,
    projectors: int = 1,
    health: tuple[str, int] | None = None,
) -> int:
    """Run the components until SIGTERM/SIGINT (or ``stop``), restarting any that exits, and
    killing (then restarting) any that sent no heartbeat for ``liveness_s`` (``None``: never).
    ``projectors`` > 1 runs that many projectors, each a share of the partitions. ``health``
    serves the probes of each child that has them from that address on
    (:func:`health_addresses`)."""
    gateway = GatewaySettings.from_env()
    components = components_for(gateway, projectors)
    probes = {} if health is None else health_addresses(components, health)
    if only:
        known = set(components) | {kind_of(c) for c in components}
        unknown = sorted(set(only) - known)
        if unknown:
            raise SluicegateError(
                f"unknown component(s) {', '.join(unknown)}; choose from {', '.join(components)}"
            )
        components = [c for c in components if c in only or kind_of(c) in only]
    unusable = taken({name: probes[name] for name in components if name in probes})
    if unusable:
        raise SluicegateError(
            f"--health: cannot serve probes on {', '.join(unusable)}; choose another first port"
        )
    if pid_file is not None:
        pid_files.claim(pid_file)
    children = [_Child(name) for name in components]
    stopping = stop or threading.Event()

    def on_signal(_signum: int, _frame: object) -> None:
        stopping.set()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
    read_http = os.environ.get("SLUICEGATE_READ_HTTP", "").strip() or DEFAULT_READ_HTTP
    log.info(
        "%s (Kafka %s, prefix %r, webhook %s:%d, read API %s)",
        ", ".join(components),
        settings.kafka,
        settings.topic_prefix,
        settings.http_host,
        settings.http_port,
        read_http,
    )
    if probes:
        listed = ", ".join(f"{n} {h}:{p}" for n, (h, p) in probes.items() if n in components)
        log.info("probes and metrics on %s", listed)
    try:
        if pid_file is not None:
            pid_files.write(pid_file, _running(children))
        while not stopping.is_set():
            now = time.monotonic()
            changed = False
            for child in children:
                child.listen(now)
                if child.process is not None and child.process.poll() is not None:
                    code = child.process.returncode
                    ran = now - child.started_at
                    child.exits_in_a_row, delay = back_off(child.exits_in_a_row, ran)
                    log.warning("%s exited with %d; restart in %d s", child.name, code, delay)
                    child.exited()
                    child.next_start = now + delay
                    changed = True
                elif liveness_s is not None:
                    child.kill_if_silent(now, liveness_s)
                if child.process is None and now >= child.next_start:
                    child.start(_command(child.name, gateway, probes.get(child.name)), now)
                    changed = True
            if changed and pid_file is not None:
                pid_files.write(pid_file, _running(children))
            time.sleep(0.2)
    finally:
        _stop_all(children)
        if pid_file is not None:
            pid_files.release(pid_file)
    return 0


def _running(children: list[_Child]) -> list[tuple[str, int]]:
    return [(c.name, c.process.pid) for c in children if c.process is not None]


def _stop_all(children: list[_Child]) -> None:
    running = [c.process for c in children if c.process is not None and c.process.poll() is None]
    for process in running:
        process.terminate()
        # A frozen (SIGSTOPped) child acts on SIGTERM only once it runs again.
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGCONT)
    deadline = time.monotonic() + 15
    for process in running:
        try:
            process.wait(max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    for child in children:
        child.exited()
