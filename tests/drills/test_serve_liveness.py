"""SIGSTOP drills of ``sluicegate serve``: a frozen component is killed and restarted.

A process stopped with SIGSTOP (a debugger left attached, a frozen VM, a swap storm) neither
exits nor answers: without a liveness check ``serve`` would keep it forever, and with it
whatever it alone served (the webhook, the read model, a partition's admissions). Each child
beats on a pipe while it is worth keeping; these drills freeze children and count what
happens: each frozen one is killed within the window and replaced, the replacements are left
alone, and the processor's admissions stay exactly once across the swap.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluicegate.supervisor import COMPONENTS, VENUE
from streams.kafka.topics import ensure_topics
from streams.settings import Settings
from tests.support.admission import AdmissionHarness
from tests.support.admission_drill import Stream, count_outcomes, plan, verify
from tests.support.component_process import ROOT
from tests.support.kafka import unique_settings, wait_until
from tests.support.ports import free_port
from tests.support.serve import http_get, pids_in

pytestmark = pytest.mark.drill

WINDOW_S = 5
KILLED = "sent no heartbeat"


@pytest.fixture()
def drill_harness() -> Iterator[AdmissionHarness]:
    harness = AdmissionHarness(partitions=6)
    harness.apply_workflow(branch_timeout="1h")  # no relaunches: the drill counts launches
    yield harness
    harness.close()


class Serve:
    """``sluicegate serve`` with a short liveness window, its pid file and its log."""

    def __init__(self, settings: Settings, tmp_path: Path, only: list[str], **env: str) -> None:
        self.pid_file = tmp_path / "serve.pids"
        self.log_path = tmp_path / "serve.log"
        command = [sys.executable, "-m", "sluicegate.cli", "serve"]
        command += ["--pid-file", str(self.pid_file)]
        for name in only:
            command += ["--only", name]
        environ = dict(
            os.environ,
            SLUICEGATE_TOPIC_PREFIX=settings.topic_prefix,
            SLUICEGATE_PARTITIONS=str(settings.partitions),
            SLUICEGATE_STATE_DIR=str(settings.state_dir),
            SLUICEGATE_SERVE_LIVENESS=f"{WINDOW_S}s",
            **env,
        )
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(command, cwd=ROOT, env=environ, stdout=log, stderr=log)

    def pids(self) -> dict[str, int]:
        return pids_in(self.pid_file)

    def kills(self) -> int:
        return self.log_path.read_text(errors="replace").count(KILLED)

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(90)


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_frozen_processor_is_replaced_and_every_occurrence_admitted_once(
    drill_harness: AdmissionHarness, tmp_path: Path
) -> None:
    bodies = plan(8_000, 0.25, seed=21)
    stream = Stream(drill_harness, bodies, rate=1_000)
    serve = Serve(drill_harness.settings, tmp_path, ["processor"])
    try:
        wait_until(lambda: "processor" in serve.pids(), timeout_s=30)
        frozen = serve.pids()["processor"]
        stream.thread.start()
        wait_until(lambda: count_outcomes(drill_harness.settings) >= 1_500, 90, interval_s=0.5)
        os.kill(frozen, signal.SIGSTOP)  # mid-stream: its transaction, sockets and group stay
        frozen_at = time.monotonic()
        wait_until(lambda: serve.pids().get("processor") not in (None, frozen), timeout_s=90)
        replaced_after = time.monotonic() - frozen_at
        assert gone(frozen), "the frozen processor was not killed"
        assert stream.done.wait(120)
        counts = verify(drill_harness, stream)
        assert serve.kills() == 1, serve.log_path.read_text()[-3000:]
    finally:
        code = serve.stop()
    print(f"\ndrill serve SIGSTOP: {counts}, replaced in {replaced_after:.1f} s", file=sys.stderr)
    assert code == 0
    assert counts["runs_admitted"] == len(stream.keys)
    # Heard last at most a beat before the freeze; polled every 0.2 s; restarted 1 s later.
    assert replaced_after < WINDOW_S + 5


def answers(url: str) -> bool:
    answer = http_get(url)
    return answer is not None and answer[0] == 200


def test_every_frozen_component_is_replaced_and_the_replacements_are_kept(tmp_path: Path) -> None:
    settings = unique_settings()
    ensure_topics(settings)
    webhook, venue = free_port(), free_port()
    serve = Serve(
        settings,
        tmp_path,
        [],
        SLUICEGATE_HTTP=f"127.0.0.1:{webhook}",
        SLUICEGATE_READ_HTTP=f"127.0.0.1:{free_port()}",
        SLUICEGATE_VENUE_URL=f"http://127.0.0.1:{venue}",
        SLUICEGATE_VENUE_STATE_DIR=str(tmp_path / "venue"),
    )
    everything = {VENUE, *COMPONENTS}
    try:
        wait_until(lambda: set(serve.pids()) == {"serve", *everything}, timeout_s=60)
        wait_until(lambda: answers(f"http://127.0.0.1:{webhook}/healthz"), timeout_s=60)
        frozen = {name: pid for name, pid in serve.pids().items() if name != "serve"}
        for pid in frozen.values():
            os.kill(pid, signal.SIGSTOP)

        def all_replaced() -> bool:
            now = serve.pids()
            return all(now.get(name) not in (None, pid) for name, pid in frozen.items())

        wait_until(all_replaced, timeout_s=120)
        assert all(gone(pid) for pid in frozen.values())
        assert serve.kills() == len(everything)
        wait_until(lambda: answers(f"http://127.0.0.1:{webhook}/healthz"), timeout_s=60)
        replacements = serve.pids()
        # Kept: nothing is killed over three windows more (their first beats came meanwhile).
        time.sleep(3 * WINDOW_S)
        assert serve.pids() == replacements, serve.log_path.read_text()[-3000:]
        assert serve.kills() == len(everything)
    finally:
        code = serve.stop()
    assert code == 0, serve.log_path.read_text()[-3000:]


def test_no_child_outlives_a_serve_killed_with_sigkill(tmp_path: Path) -> None:
    """serve killed outright (SIGKILL, the OOM killer, a crash) cannot stop its children: the
    kernel does (``PR_SET_PDEATHSIG``: SIGTERM, so each stops as it does when asked). They
    used to run on as orphans, holding the webhook's port and the venue's, so the serve
    started next could not bind them."""
    settings = unique_settings()
    ensure_topics(settings)
    webhook, venue = free_port(), free_port()
    env = {
        "SLUICEGATE_HTTP": f"127.0.0.1:{webhook}",
        "SLUICEGATE_READ_HTTP": f"127.0.0.1:{free_port()}",
        "SLUICEGATE_VENUE_URL": f"http://127.0.0.1:{venue}",
        "SLUICEGATE_VENUE_STATE_DIR": str(tmp_path / "venue"),
    }
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    serve = Serve(settings, tmp_path / "first", [], **env)
    children: dict[str, int] = {}
    try:
        wait_until(lambda: set(serve.pids()) == {"serve", VENUE, *COMPONENTS}, timeout_s=60)
        wait_until(lambda: answers(f"http://127.0.0.1:{webhook}/healthz"), timeout_s=60)
        children = {name: pid for name, pid in serve.pids().items() if name != "serve"}
        killed_at = time.monotonic()
        serve.process.send_signal(signal.SIGKILL)
        serve.process.wait(10)
        wait_until(lambda: all(gone(pid) for pid in children.values()), timeout_s=60)
        elapsed = time.monotonic() - killed_at
        print(f"\n{len(children)} children gone {elapsed:.1f} s after serve", file=sys.stderr)
        # Each stopped as when asked (SIGTERM), not killed: the processor says it stopped.
        log = serve.log_path.read_text(errors="replace")
        assert "processor admission/processor-1 stopped" in log, log[-3000:]
    finally:
        for pid in children.values():
            if not gone(pid):
                os.kill(pid, signal.SIGKILL)
    second = Serve(settings, tmp_path / "second", [], **env)
    try:
        wait_until(lambda: answers(f"http://127.0.0.1:{webhook}/healthz"), timeout_s=60)
        wait_until(lambda: answers(f"http://127.0.0.1:{venue}/paper/v1/health"), timeout_s=60)
    finally:
        assert second.stop() == 0, second.log_path.read_text()[-3000:]
