"""A rebuild's bulk load spread over worker processes, one :class:`~projections.share.Share`
of the partitions each.

Projecting is Python work on one core per process (decoding, mapping, formatting the
``COPY``), so a rebuild runs it in ``workers`` processes (``python -m
projections.parallel_load``), all writing the same fresh schema. Worker ``k`` of ``n`` is a
bulk-loading :class:`~projections.projector.Projector` of the partitions whose number is
``k`` modulo ``n``, up to the rebuild's target; it reads, checks and stores only its own
partitions' offsets. Writers of a schema serialize on its lock per transaction, and the
tables' policies do not depend on how partitions interleave, so the workers leave the rows a
single projector leaves: a key whose rows two workers hold is upserted by the later one.

What is guaranteed:

- :func:`load_in_parallel` returns only when every worker reported its target reached, its
  held rows written and its offsets stored.
- When a worker fails, the others are killed and the load raises: PostgreSQL refusing held
  rows as :class:`~projections.errors.HeldRowsRefused` (the rebuild then loads again batch
  by batch, parking them, as it does without workers), anything else as
  :class:`~projections.errors.ProjectionError` naming the worker and its error. The fresh
  schema is then half-written; the rebuild drops it.
- Workers do not outlive the process that started them: each learns of its parent's death
  from its stdin closing and, on Linux, from a SIGKILL the kernel sends at once
  (``PR_SET_PDEATHSIG``); a worker whose stored offsets moved (another rebuild re-created the
  schema) stops with an error instead of writing on. So a kill -9 of a rebuild leaves no
  worker writing into the schema the next rebuild re-creates.

Protocol: the parent writes one pickled :class:`Job` to the worker's stdin and keeps it open;
the worker answers on stdout with lines ``progress <messages>`` per batch and one final
``done <messages>``, ``refused <text>`` or ``failed <text>``. Anything else a
worker prints goes to stderr.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from projections.errors import HeldRowsRefused, ProjectionError
from projections.projector import Projector
from projections.share import Share
from projections.store import Offsets
from streams import logs
from streams.heartbeat import signal_on_parent_death
from streams.settings import Settings

PARALLEL_FROM = 50_000
"""Fewer messages than this are loaded by one process: starting workers costs more."""
MAX_WORKERS = 8
EXIT_WAIT_S = 30.0
"""How long a worker that reported may take to close before it is killed."""


@dataclass(frozen=True)
class Job:
    """What one worker loads: ``goal`` holds its share's partitions only."""

    settings: Settings
    schema: str
    share: Share
    goal: Offsets
    held_rows: int
    timeout_s: float | None
    parent: int


def auto_workers(goal: Offsets) -> int:
    """How many workers a rebuild up to ``goal`` uses unless told: one per core (at most
    :data:`MAX_WORKERS`, at most one per partition number), and one below
    :data:`PARALLEL_FROM` messages."""
    if sum(goal.values()) < PARALLEL_FROM:
        return 1
    numbers = max((partition for _, partition in goal), default=0) + 1
    return max(1, min(os.cpu_count() or 1, MAX_WORKERS, numbers))


def load_in_parallel(
    settings: Settings,
    schema: str,
    goal: Offsets,
    *,
    workers: int,
    held_rows: int,
    timeout_s: float | None,
    on_progress: Callable[[int], None] | None = None,
) -> int:
    """Load ``schema`` (fresh, migrated, nobody reading it) up to ``goal`` with ``workers``
    processes; how many messages they projected. See the module docstring for what is
    guaranteed."""
    env = dict(os.environ)
    # The worker imports this package from where the parent did, installed or not.
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    procs: list[subprocess.Popen[bytes]] = []
    outcomes: dict[int, tuple[str, str]] = {}
    try:
        for index in range(workers):
            share = Share(index, workers)
            job = Job(
                settings=settings,
                schema=schema,
                share=share,
                goal={tp: o for tp, o in goal.items() if tp in share},
                held_rows=held_rows,
                timeout_s=timeout_s,
                parent=os.getpid(),
            )
            proc = subprocess.Popen(
                [sys.executable, "-m", "projections.parallel_load"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
            )
            procs.append(proc)
            assert proc.stdin is not None
            # A worker that died at once is reported by _await, with its exit code.
            with contextlib.suppress(BrokenPipeError):
                proc.stdin.write(pickle.dumps(job))
                proc.stdin.flush()
        outcomes = _await(procs, timeout_s, on_progress)
    finally:
        _end(procs, finished=sum(word == "done" for word, _ in outcomes.values()) == workers)
    return _result(outcomes, workers)


def _await(
    procs: list[subprocess.Popen[bytes]],
    timeout_s: float | None,
    on_progress: Callable[[int], None] | None,
) -> dict[int, tuple[str, str]]:
    """Read the workers' lines until each has reported or one has failed."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s + EXIT_WAIT_S
    outcomes: dict[int, tuple[str, str]] = {}
    pending: dict[int, bytes] = {}
    with selectors.DefaultSelector() as selector:
        for index, proc in enumerate(procs):
            assert proc.stdout is not None
            selector.register(proc.stdout, selectors.EVENT_READ, index)
            pending[index] = b""
        while len(outcomes) < len(procs):
            if any(word != "done" for word, _ in outcomes.values()):
                break
            if deadline is not None and time.monotonic() > deadline:
                raise ProjectionError(
                    f"the rebuild's workers did not reach their targets within {timeout_s} s"
                )
            for key, _ in selector.select(timeout=0.5):
                index = key.data
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    selector.unregister(key.fileobj)
                    if index not in outcomes:
                        code = procs[index].wait()
                        outcomes[index] = ("failed", f"exited with code {code} without a word")
                    continue
                *lines, pending[index] = (pending[index] + chunk).split(b"\n")
                for line in lines:
                    word, _, rest = line.decode("utf-8", "replace").partition(" ")
                    if word == "progress":
                        if on_progress is not None:
                            on_progress(int(rest))
                    else:
                        outcomes[index] = (word, rest)
    return outcomes


def _end(procs: list[subprocess.Popen[bytes]], *, finished: bool) -> None:
    """Close every worker's stdin and wait for it to exit, at most :data:`EXIT_WAIT_S`; unless
    every worker ``finished``, kill them first (the fresh schema is dropped anyway)."""
    for proc in procs:
        if not finished and proc.poll() is None:
            proc.kill()
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
    for proc in procs:
        try:
            proc.wait(EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def _result(outcomes: dict[int, tuple[str, str]], workers: int) -> int:
    for index, (word, text) in sorted(outcomes.items()):
        if word == "refused":
            raise HeldRowsRefused(text)
        if word != "done":
            raise ProjectionError(f"rebuild worker {index + 1} of {workers}: {text}")
    return sum(int(text) for _, text in outcomes.values())


# -- the worker ---------------------------------------------------------------------------


def _die_with_parent(parent: int) -> None:
    if not signal_on_parent_death(signal.SIGKILL, parent):  # the parent died first
        os._exit(1)


def _stop_at_eof(fd: int, stop: threading.Event) -> None:
    # The bare descriptor: a buffered reader's lock held by this daemon thread would stop
    # the interpreter's shutdown.
    with contextlib.suppress(OSError):
        while os.read(fd, 4096):
            pass
    stop.set()


def _one_line(text: str) -> str:
    return " ".join(text.split())


def work() -> int:
    """A worker's whole life (``python -m projections.parallel_load``)."""
    out = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)  # a stray print must not read as a word to the parent
    job: Job = pickle.load(sys.stdin.buffer)
    _die_with_parent(job.parent)
    # Its warnings (and librdkafka's) in the rebuild's log format; its progress is the words.
    logs.configure(f"rebuild:{job.share}")
    logging.getLogger("sluicegate.projector").setLevel(logging.WARNING)
    stop = threading.Event()
    threading.Thread(target=_stop_at_eof, args=(sys.stdin.fileno(), stop), daemon=True).start()

    def say(*words: object) -> None:
        out.write(" ".join(str(w) for w in words) + "\n")

    try:
        with Projector(
            job.settings,
            schema=job.schema,
            durable_batches=False,
            held_rows=job.held_rows,
            share=job.share,
            stop=stop,
            on_progress=lambda n: say("progress", n),
        ) as projector:
            projector.run_until(job.goal, timeout_s=job.timeout_s)
            say("done", projector.stats.messages)
    except HeldRowsRefused as e:
        say("refused", _one_line(str(e)))
        return 1
    except BaseException as e:  # every failure is the parent's to report
        say("failed", _one_line(f"{type(e).__name__}: {e}"))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(work())
