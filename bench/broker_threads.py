"""The local broker's CPU by what its threads do (Linux, a broker on this machine).

A JVM's threads are Linux threads: ``/proc/<pid>/task/<tid>/stat`` has each one's CPU time,
and its name, cut to 15 characters (``data-plane-kafk`` is both a request handler and a
network thread). Where the JDK's ``jcmd`` is installed, ``jcmd <pid> Thread.print`` gives the
full names (each thread's ``nid`` is its tid), so request handling splits into its two pools.

:func:`snapshot` reads every thread's CPU seconds and name; :func:`by_group` (pure) turns two
snapshots into CPU seconds per :data:`GROUPS` entry, so a benchmark can say which part of the
broker its load keeps busy (a transaction's requests land on the request handlers, its
partition registrations and commit markers on the transaction coordinator's threads).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from bench.cpu import PROC, own_cpu_seconds, read_stat

# First match wins, so the specific prefixes come before the general ones. Prefixes of 15
# characters or fewer also match the cut names /proc gives.
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("request handlers", ("data-plane-kafka-request-handler",)),
    ("network threads", ("data-plane-kafka-network-thread",)),
    ("request handlers and network threads", ("data-plane-kafk",)),
    (
        "transaction coordinator (partition registration, commit markers)",
        ("AddPartitionsTo", "TxnMarkerSender", "transaction-log"),
    ),
    ("group coordinator (consumer offsets, joins)", ("group-coordinat", "executor-group")),
    ("delayed requests (fetch and produce purgatories)", ("ExpirationReape", "executor-")),
    ("scheduler, log cleaner, metrics", ("kafka-scheduler", "kafka-log-clean", "metrics-meter")),
    (
        "KRaft controller and metadata",
        ("kafka-", "quorum-controll", "controller-", "broker-", "raft-"),
    ),
    ("JIT compiler", ("C1 CompilerThre", "C2 CompilerThre")),
    ("garbage collector", ("GC Thread", "G1 ")),
)
OTHER = "other"

_NID = re.compile(r'^"(?P<name>[^"]*)".*\bnid=0x(?P<nid>[0-9a-fA-F]+)', re.MULTILINE)


def group_of(name: str) -> str:
    """The :data:`GROUPS` entry a thread of this (full or cut) name belongs to."""
    for group, prefixes in GROUPS:
        if name.startswith(prefixes):
            return group
    return OTHER


def parse_thread_dump(text: str) -> dict[int, str]:
    """tid -> full thread name, from the text of ``jcmd <pid> Thread.print``."""
    return {int(m["nid"], 16): m["name"] for m in _NID.finditer(text)}


def java_thread_names(pid: int) -> dict[int, str]:
    """The JVM's own thread names by tid; empty when ``jcmd`` is not here or does not answer."""
    jcmd = shutil.which("jcmd")
    if jcmd is None:
        return {}
    try:
        done = subprocess.run(
            [jcmd, str(pid), "Thread.print"],
            check=False,
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return parse_thread_dump(done.stdout) if done.returncode == 0 else {}


def snapshot(pid: int, proc: Path = PROC) -> dict[int, tuple[str, float]]:
    """tid -> (name as /proc gives it, user + system CPU seconds) of every thread of ``pid``
    now; empty if the process is not readable here."""
    tasks = proc / str(pid) / "task"
    try:
        tids = [entry.name for entry in os.scandir(tasks)]
    except OSError:
        return {}
    threads: dict[int, tuple[str, float]] = {}
    for tid in tids:
        found = read_stat(tid, tasks)
        if found is not None:  # None: the thread ended between the listing and the read
            threads[int(tid)] = (found[0], own_cpu_seconds(found[1]))
    return threads


def by_group(
    before: Mapping[int, tuple[str, float]],
    after: Mapping[int, tuple[str, float]],
    names: Mapping[int, str] | None = None,
) -> dict[str, float]:
    """CPU seconds each group used between two snapshots, largest first. A thread started in
    between counts from zero; one that ended is left out (its time is not readable any
    more). ``names`` (full names by tid) take precedence over the cut ones."""
    used: dict[str, float] = {}
    for tid, (cut, seconds) in after.items():
        spent = seconds - before.get(tid, (cut, 0.0))[1]
        if spent <= 0:
            continue
        group = group_of((names or {}).get(tid, cut))
        used[group] = used.get(group, 0.0) + spent
    return dict(sorted(used.items(), key=lambda item: -item[1]))
