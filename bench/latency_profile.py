"""Section 2's profile: where the CPU goes while the webhook is posted to at one rate.

One extra webhook run (not among the timed ones) on fresh topics, at ``rate`` (the target's
1,000/s by default), with py-spy (100 Hz) attached to the ``sluicegate ingest`` and
``sluicegate processor`` processes and the broker's CPU read per thread before and after
(:mod:`bench.broker_threads`). The notes it returns say what each part of the path kept busy
while the latency target was missed: the ingest's and the processor's top frames, and which
of the broker's threads (request handlers, the transaction coordinator's senders, ...) did
the broker's share. py-spy itself takes CPU from the same cores, so this run's latencies are
not comparable with the timed ones; the note gives them only to say how loaded it was.

Then one more run at the same rate with librdkafka's protocol debug log on in both servers
(:func:`request_note`): the Kafka requests the processor sent per transaction (its
``EndTxn`` requests count the transactions) and the ingest per post, by request type.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from pathlib import Path

from bench.backlog import ROOT
from bench.broker_threads import by_group, java_thread_names, snapshot
from bench.cpu import broker_pid
from bench.profile import Profiler, available, top_frames
from bench.webhook import serving, webhook

PROFILE_NOTE = "What the webhook path kept busy"
"""Every note of the profile starts so (a later profile replaces them all)."""
_SENT = re.compile(rb"Sent (\w+)Request")
_SHOWN_CORES = 0.005  # thread groups that used less are left out of the listing


def profile_notes(rate: float, seconds: float, partitions: int) -> list[str]:
    """The notes of one profiled webhook run at ``rate`` for ``seconds``, then of
    :func:`request_note`'s."""
    return [*_profiled(rate, seconds, partitions), request_note(rate, seconds, partitions)]


def _profiled(rate: float, seconds: float, partitions: int) -> list[str]:
    if not available():
        return [f"{PROFILE_NOTE}: not profiled, py-spy is not installed (pip install py-spy)."]
    broker = broker_pid()
    with serving(partitions) as (stage, servers):
        names = java_thread_names(broker) if broker is not None else {}
        before = snapshot(broker) if broker is not None else {}
        started = time.monotonic()
        profilers = [Profiler(child.pid) for child in servers.children]
        try:
            measured = webhook(stage, servers, rate, seconds, servers.meter())
        finally:
            raws = [profiler.stop() for profiler in profilers]
        elapsed = time.monotonic() - started
        after = snapshot(broker) if broker is not None else {}
    head = (
        f"{PROFILE_NOTE} at {rate:,.0f}/s: one extra run of {seconds:.0f} s on fresh topics "
        f"({partitions} partitions), not among the timed runs, with py-spy sampling the "
        f"ingest and the processor at 100 Hz (its latencies: {measured.summary()})"
    )
    notes = [head + "."]
    threads = by_group(before, after, names)
    if threads:
        named = "the JVM's thread names (jcmd)" if names else "thread names cut to 15 characters"
        total = sum(threads.values()) / elapsed
        listing = "\n".join(
            f"  {used / elapsed:5.2f} cores  {group}"
            for group, used in threads.items()
            if used / elapsed >= _SHOWN_CORES
        )
        notes.append(
            f"{PROFILE_NOTE}, the broker: its CPU by what its threads do ({total:.2f} cores over "
            f"{elapsed:.1f} s, stragglers' wait included; {named}):\n{listing}"
        )
    for role, raw in zip(("ingest", "processor"), raws, strict=True):
        notes.append(
            f"{PROFILE_NOTE}, `sluicegate {role}`: py-spy, top frames by share of samples:\n"
            + top_frames(raw, root=str(ROOT))
        )
    return notes


def requests_sent(log: bytes) -> Counter[str]:
    """The Kafka requests a client logged sending (librdkafka ``debug=protocol``), by type."""
    return Counter(kind.decode() for kind in _SENT.findall(log))


def _appended(path: Path, since: int) -> bytes:
    with path.open("rb") as f:
        f.seek(since)
        return f.read()


def request_note(rate: float, seconds: float, partitions: int) -> str:
    """The Kafka requests the processor sent per transaction and the ingest per post, counted
    in one more webhook run at ``rate`` with librdkafka's protocol debug log on."""
    with serving(partitions, {"SLUICEGATE_RDKAFKA_DEBUG": "protocol"}) as (stage, servers):
        sizes = [log.stat().st_size for log in servers.logs]
        measured = webhook(stage, servers, rate, seconds, servers.meter())
        ingest, processor = (
            _appended(log, at) for log, at in zip(servers.logs, sizes, strict=True)
        )
    by_processor = requests_sent(processor)
    per = (
        ("processor", by_processor, by_processor["EndTxn"], "transaction"),
        ("ingest", requests_sent(ingest), measured.sent, "post"),
    )
    lines = []
    for role, sent, count, unit in per:
        if not count:
            continue
        lines.append(f"  `sluicegate {role}`, per {unit} ({count:,} {unit}s):")
        lines += [f"  {n / count:8.2f}  {kind}" for kind, n in sent.most_common()]
        lines.append(f"  {sum(sent.values()) / count:8.2f}  all")
    return (
        f"{PROFILE_NOTE}, in Kafka requests: the same rate once more for {seconds:.0f} s with "
        "librdkafka's protocol debug log on (so slower; only its counts of the requests each "
        "client sent are used, consumers' fetches included):\n" + "\n".join(lines)
    )
