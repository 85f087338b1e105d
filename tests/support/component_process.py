"""``sluicegate <component>`` as a child process of a drill, to kill, freeze and resume.

The drills count runs, launches and orders around real processes: SIGKILL (no clean-up at
all), SIGSTOP (the process keeps its sockets, its group membership and any open
transaction, and says nothing) and SIGCONT. A component's output goes to its own log file,
which a drill reads to know what it has done since a given moment.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from streams.settings import Settings
from tests.support.drills import stopped

ROOT = Path(__file__).resolve().parents[2]


class ComponentProcess:
    """``sluicegate <component> <args>`` with a test's settings (topic prefix, partitions,
    state directory) and ``env`` on top of this process's environment."""

    def __init__(
        self,
        settings: Settings,
        component: str,
        args: Sequence[str] = (),
        *,
        log_path: Path,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.settings = settings
        self.command = [sys.executable, "-m", "sluicegate.cli", component, *args]
        self.log_path = log_path
        self.env = dict(env or {})
        self.process: subprocess.Popen[bytes] | None = None
        self.kills = 0
        self.resumed_at = 0
        """The log's size when the process was last resumed."""

    def start(self) -> None:
        env = dict(os.environ)
        env.update(
            self.env,
            SLUICEGATE_TOPIC_PREFIX=self.settings.topic_prefix,
            SLUICEGATE_PARTITIONS=str(self.settings.partitions),
            SLUICEGATE_STATE_DIR=str(self.settings.state_dir),
        )
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(self.command, cwd=ROOT, env=env, stdout=log, stderr=log)

    def kill9(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)
        self.kills += 1

    def pause(self) -> None:
        """SIGSTOP: the process keeps its sockets and its open transaction, and says nothing."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        self.resumed_at = self.log_size()
        self.process.send_signal(signal.SIGCONT)

    def stopped(self) -> bool:
        """Whether the process is frozen (SIGSTOP took effect)."""
        assert self.process is not None
        return stopped(self.process.pid)

    def log_size(self) -> int:
        return self.log_path.stat().st_size

    def log_tail(self, chars: int = 4000) -> str:
        """The end of the log, for a failure message."""
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return "(no log)"

    def log_mentions(self, text: str, after: int) -> bool:
        """Whether the log holds ``text`` past its first ``after`` bytes."""
        with self.log_path.open("rb") as log:
            log.seek(after)
            return text.encode() in log.read()

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it has not exited within 30 s."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class ProcessorProcess(ComponentProcess):
    """``sluicegate processor --instance-id <id>``, its log ``<log_dir>/<id>.log``."""

    def __init__(
        self,
        settings: Settings,
        instance_id: str,
        log_dir: Path,
        env: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(
            settings,
            "processor",
            ["--instance-id", instance_id],
            log_path=log_dir / f"{instance_id}.log",
            env=env,
        )
