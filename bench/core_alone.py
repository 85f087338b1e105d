"""Section 1's ceiling: the admission core alone, on one thread, over the same records.

Every delivery of the backlog goes through what the processor does per delivery between
consuming it and producing its records: ``AdmissionApp.decode_input``, ``to_command`` and
the engine's :class:`~streams.engine.deciding.Decider` (decode the stored state, ``decide``,
``evolve``, encode each event and the new state, the timer entries), with the state kept in
a dict instead of RocksDB and each produced record appended to a list instead of sent. No
Kafka client, no state store, no transaction: what one core can admit when only deciding
costs anything. Between this ceiling and one processor instance is the engine's share
(consuming, producing, RocksDB, committing); between this ceiling and the limit, deciding's.

It runs as a process of its own (``python -m bench.core_alone --backlog FILE``), as each
processor instance does, so the benchmark process's heap and threads do not slow it: it reads
the caller's backlog from the file :meth:`~bench.backlog.Backlog.save` wrote (it planned the
backlog again until 2026-12-04, about 6 s of every run) and prints the seconds as JSON. The
records it produced are decoded after the clock stops and counted as every other contender's
are (:mod:`bench.counts`); wrong counts exit with status 3. Besides the seconds it prints the
CPU its thread used over the same loop and how long it waited for a core meanwhile, so that
a ceiling slowed by other work on the machine shows as such.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import cast

from confluent_kafka import Message

from bench.backlog import Backlog
from bench.counts import CountsWrong, counted, expect_outcomes
from bench.cpu import wait_seconds
from schemas.codec import decode
from schemas.events import WorkflowRevised
from streams.adapters.workflow_table import WorkflowTable
from streams.apps.admission import AdmissionApp
from streams.engine.batch import Input
from streams.engine.deciding import Decider
from streams.engine.store import PartitionStore
from streams.settings import Settings, load_settings


class _Workflow:
    """The one workflow the backlog is for, where the app asks its table."""

    def __init__(self, workflow: WorkflowRevised) -> None:
        self.workflow = workflow

    def get(self, subscription: str, environment: str) -> WorkflowRevised | None:
        w = self.workflow
        return w if (w.subscription, w.environment) == (subscription, environment) else None


class _DictStore:
    """What the decider asks of a partition's store (``get``, ``put``), in a dict."""

    def __init__(self) -> None:
        self.values: dict[str, bytes] = {}

    def get(self, key: str) -> bytes | None:
        return self.values.get(key)

    def put(self, key: str, value: bytes | None) -> None:
        if value is None:
            self.values.pop(key, None)
        else:
            self.values[key] = value


@dataclasses.dataclass(frozen=True)
class Spent:
    """What admitting the backlog took: ``seconds`` on the clock, ``cpu_seconds`` of this
    thread, and ``waited_seconds`` it was runnable but not running (None where the kernel
    keeps no such figure)."""

    seconds: float
    cpu_seconds: float
    waited_seconds: float | None


def run(settings: Settings, backlog: Backlog) -> tuple[Spent, list[bytes | None]]:
    """What admitting every delivery of ``backlog`` took, and the values of the records
    produced."""
    workflow = decode(backlog.workflow_value)
    assert isinstance(workflow, WorkflowRevised)
    app = AdmissionApp(settings, cast(WorkflowTable, _Workflow(workflow)))
    produced: list[bytes | None] = []

    def emit(
        topic: str,
        key: str,
        value: bytes | None,
        partition: int | None,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> None:
        produced.append(value)

    store = _DictStore()
    stores = cast(Mapping[int, PartitionStore], {0: store})
    decider = Decider(app, stores, "dead-letters", emit, lambda: 1)  # every key is partition 0's
    topic = app.input_topics[0]
    now = int(time.time() * 1000)
    waited = wait_seconds(os.getpid(), main_thread=True)
    cpu = time.thread_time()
    started = time.perf_counter()
    no_message = cast(Message, None)  # only dead letters read it, and none are written here
    for offset, d in enumerate(backlog.deliveries):
        record = app.decode_input(d.value)
        decider.apply(Input(no_message, topic, 0, offset, d.key.decode(), record, None), now)
    seconds = time.perf_counter() - started
    cpu = time.thread_time() - cpu
    after = wait_seconds(os.getpid(), main_thread=True)
    spent = Spent(seconds, cpu, None if waited is None or after is None else after - waited)
    return spent, produced


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.core_alone", description=__doc__)
    parser.add_argument("--backlog", type=Path, required=True, help="Backlog.save()'s file")
    args = parser.parse_args(argv)
    backlog = Backlog.load(args.backlog)
    spent, produced = run(load_settings({}), backlog)
    try:
        expect_outcomes(*counted(produced), backlog)
    except CountsWrong as e:
        print(f"counts wrong: {e}", file=sys.stderr)
        return 3
    print(json.dumps(dataclasses.asdict(spent)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
