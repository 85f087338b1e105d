"""Section 1's figures: what the admission runs measured, as a :class:`~bench.results.Section`.

Pure: :func:`section` turns :class:`Results` (rates per contender per run, failures, what
admission wrote per delivery) into tables, targets (the issue's, met or missed and by how
much), notes and plot series; nothing here touches Kafka or Postgres.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from bench.limit import Output
from bench.results import Cell, Section, Series, Spread, Table, Target, spread

SLUICEGATE_1 = "Sluicegate, 1 instance"
SLUICEGATE_2 = "Sluicegate, 2 instances"
INTERPRETED = "Sluicegate, 1 instance, core not compiled"
LIMIT = "limit: bare transactional consume-produce"
CEILING = "ceiling: the admission core alone, 1 thread, no Kafka, no RocksDB"
PG_EACH = "Postgres ON CONFLICT, 1 txn per delivery, 4 connections"
PG_BATCH = "Postgres ON CONFLICT, 1,000 per txn"
DBOS = "DBOS Transact, 1 workflow per delivery"
CEILING_NOTE = (
    "The ceiling (`bench/core_alone.py`), the limit's mirror: in a process of its own (which "
    "reads the same records from a file), each "
    "delivery decoded and decided the way the processor decides it (the app's "
    "`decode_input` and `to_command` and the engine's `Decider`: the stored state decoded, "
    "`decide`, `evolve`, each event and the new state encoded, the timer entries), with the "
    "state in a dict instead of RocksDB and every record appended to a list instead of sent; "
    "its records are counted like the others'. No Kafka client, no state store, no "
    "transaction: what one core admits when deciding is the only cost. Between the ceiling "
    "and one instance is what the engine costs (consuming, producing, RocksDB, committing, "
    "on the cores the broker shares); between the ceiling and the limit, what deciding costs."
)
SHORT = {
    SLUICEGATE_1: "Sluicegate x1",
    SLUICEGATE_2: "Sluicegate x2",
    INTERPRETED: "x1 not compiled",
    LIMIT: "limit",
    CEILING: "core alone",
    PG_EACH: "PG per delivery",
    PG_BATCH: "PG batched",
    DBOS: "DBOS",
}


USAGE_KEYS = ("seconds", "instances", "processor", "loop_waited")
"""What every metered run gives; ``broker`` too where a broker took part (not the ceiling)."""
CPU_NOTE = (
    "CPU while admitting: user + system time from `/proc` of the processor "
    "processes (every thread: the loop and librdkafka's) and of the local broker, from the "
    "processors' start until the last outcome was visible, per second of that time (cores; "
    "per instance where two ran) and per delivery. 'Loop waited': each processor's main "
    "thread's time runnable but not running (the second field of its `schedstat`), per second. "
    "A processor near 1.00 cores whose loop hardly waits is bound by its own CPU, not by the "
    "broker or the other processes: at that point only less CPU per delivery admits more. The "
    "ceiling's row is its one thread over its timed loop (read in that process: "
    "`time.thread_time()` and its own `schedstat`): what deciding alone costs per delivery, "
    "and whether other work on the machine slowed it."
)


@dataclass
class Results:
    rates: dict[str, list[float]] = field(default_factory=dict)
    failures: dict[str, list[str]] = field(default_factory=dict)
    deliveries: dict[str, int] = field(default_factory=dict)
    profile: list[Output] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    cpu: dict[str, list[dict[str, float]]] = field(default_factory=dict)
    """Per Sluicegate contender and the ceiling, per good run: :data:`USAGE_KEYS` (CPU
    seconds, the run's seconds and how many instances shared the work) and ``broker``."""

    def add(self, name: str, deliveries: int, seconds: float) -> None:
        self.rates.setdefault(name, []).append(deliveries / seconds)
        self.deliveries[name] = deliveries
        print(f"  {name}: {deliveries / seconds:,.0f} deliveries/s ({seconds:.1f} s)", flush=True)

    def fail(self, name: str, reason: str) -> None:
        self.failures.setdefault(name, []).append(reason)
        print(f"  {name}: FAILED: {reason}", flush=True)

    def add_cpu(self, name: str, usage: dict[str, float]) -> None:
        """What one good run of ``name`` used: ``seconds`` (from the processors' start to the
        meter's reading; the ceiling's: its loop), ``instances``, and CPU seconds of the
        ``processor`` processes together (the ceiling's: its thread's), their main threads'
        wait for a CPU (``loop_waited``) and, where a broker took part, the ``broker``'s."""
        missing = set(USAGE_KEYS) - set(usage)
        if missing:
            raise ValueError(f"usage of {name} lacks {sorted(missing)}")
        self.cpu.setdefault(name, []).append(dict(usage))

    def median(self, name: str) -> float | None:
        values = self.rates.get(name)
        return spread(values).median if values else None


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a and b else "-"


def _target(name: str, wanted: str, mine: float | None, bar: float | None, factor: float) -> Target:
    """``mine >= factor * bar``, shown as a ratio (or as absolute rates when factor is 1)."""
    if mine is None or bar is None:
        return Target(name, wanted, "not measured", False, "no figure (see notes)")
    need = factor * bar
    met = mine >= need
    by = f"{(mine / need - 1) * 100:+.0f}% ({mine:,.0f}/s vs {need:,.0f}/s needed)"
    return Target(name, wanted, f"{mine / bar:.2f} x" if factor != 1 else f"{mine:,.0f}/s", met, by)


def _pg_each_note(scale: dict[str, int | float]) -> list[str]:
    first = scale.get("pg_each_deliveries", scale["deliveries"])
    if first >= scale["deliveries"]:
        return []
    return [
        f"{PG_EACH} ran on the first {first:,} deliveries (the same share of repeats): a "
        "transaction per delivery costs the same however many follow, and the whole backlog "
        "would take it minutes of every run."
    ]


def section(results: Results, scale: dict[str, int | float]) -> Section:
    one = results.median(SLUICEGATE_1)
    rows: list[list[Cell]] = []
    order = [SLUICEGATE_1, SLUICEGATE_2, INTERPRETED, LIMIT, CEILING, PG_EACH, PG_BATCH, DBOS]
    for name in order + sorted(set(results.rates) - set(order)):
        values = results.rates.get(name, [])
        failed = len(results.failures.get(name, []))
        if not values and not failed:
            continue
        shown = spread(values).shown() if values else "failed"
        rows.append(
            [
                name,
                results.deliveries.get(name, 0),
                shown,
                f"{len(values)} ok" + (f", {failed} failed" if failed else ""),
                _ratio(one, results.median(name)),
            ]
        )
    tables = [
        Table(
            "Deliveries per second (median (min to max) of the runs)",
            ["contender", "deliveries", "deliveries/s", "runs", "Sluicegate x1 / it"],
            rows,
        )
    ]
    if results.profile:
        tables.append(
            Table(
                "What admission writes per delivery (measured on the topics of a Sluicegate run)",
                ["topic", "records", "records per delivery", "mean key bytes", "mean value bytes"],
                [
                    [o.topic, o.records, f"{o.records / o.inputs:.2f}", o.key_bytes, o.value_bytes]
                    for o in results.profile
                ],
            )
        )
    two = results.median(SLUICEGATE_2)
    targets = [
        _target("one instance", ">= 10,000 deliveries/s", one, 10_000.0, 1.0),
        _target("one instance vs the limit", ">= 0.5 x", one, results.median(LIMIT), 0.5),
        _target("one instance vs Postgres batched", "> 1 x", one, results.median(PG_BATCH), 1.0),
        _target("one instance vs DBOS", "> 100 x", one, results.median(DBOS), 100.0),
        _target("two instances vs one", "> 1 x", two, one, 1.0),
    ]
    targets[2] = Target(
        targets[2].name,
        targets[2].wanted,
        _ratio(one, results.median(PG_BATCH)) + " x",
        targets[2].met,
        targets[2].by,
    )
    targets[4] = Target(
        targets[4].name, targets[4].wanted, _ratio(two, one) + " x", targets[4].met, targets[4].by
    )
    ceiling = results.median(CEILING)
    if ceiling is not None:
        targets[0] = dataclasses.replace(
            targets[0],
            by=f"{targets[0].by}; the core alone (the ceiling) decides {ceiling:,.0f}/s on one "
            "thread",
        )
    used = _usage(results, SLUICEGATE_1)
    if used is not None:
        core = _usage(results, CEILING)
        alone = "" if core is None else f"; the core alone {core.per_delivery_us.median:.0f} us"
        broker = (
            ""
            if used.broker_cores is None
            else f", the broker used {used.broker_cores.median:.2f} cores"
        )
        targets[0] = dataclasses.replace(
            targets[0],
            by=f"{targets[0].by}; its process used {used.cores.median:.2f} cores "
            f"({used.per_delivery_us.median:.0f} us of CPU per delivery{alone}), its loop waited "
            f"{used.waited_ms.median:.0f} ms/s for a CPU{broker}",
        )
    first = [SLUICEGATE_1, SLUICEGATE_2]
    cpu_rows = [
        [name, *u.cells()]
        for name in first + sorted(set(results.cpu) - {*first, CEILING}) + [CEILING]
        if (u := _usage(results, name)) is not None
    ]
    if cpu_rows:
        tables.append(
            Table(
                "CPU while admitting (median of runs, min to max)",
                [
                    "contender",
                    "processor cores (per instance)",
                    "processor CPU per delivery (us)",
                    "loop waited for a CPU (ms/s, per instance)",
                    "broker cores",
                    "broker CPU per delivery (us)",
                ],
                cpu_rows,
            )
        )
    notes = [
        f"{scale['deliveries']:,} deliveries ({scale['duplicates']:.0%} duplicates, "
        f"{scale['occurrences']:,} occurrences), 3 slots, {scale['partitions']} partitions, "
        f"{scale['runs']} runs; every contender of a run reads the same encoded records.",
        "Sluicegate's clock starts when the `sluicegate processor` processes are started (so it "
        "includes interpreter start-up, group join and restore of an empty store) and stops when "
        "a read_committed consumer has seen the last delivery's outcome.",
        f"DBOS ran on the first {scale['dbos_deliveries']:,} deliveries only (one durable "
        "workflow each, in one process); its rate is per delivery of that subset.",
        *_pg_each_note(scale),
        "The limit and Postgres run in the benchmark process; each Sluicegate instance is its "
        "own OS process. The counts of every run were checked exact: one outcome per delivery, "
        "one run per occurrence, one launch per run and slot (Postgres and DBOS: rows in their "
        "tables; the limit: the records it was to write, per output topic).",
    ]
    if INTERPRETED in results.rates:
        notes.append(
            f"{INTERPRETED}: the same `sluicegate processor`, importing the compiled modules "
            "(the admission core, the codec's varint reader) from their Python source "
            "(`python -m bench.interpreted`), in each run beside the others: what compiling "
            "them buys on this machine."
        )
    if CEILING in results.rates:
        notes.append(CEILING_NOTE)
    if cpu_rows:
        notes.append(CPU_NOTE)
    for name, reasons in results.failures.items():
        notes.append(
            f"{name}: {len(reasons)} run(s) failed and are left out of its figure: {reasons[0]}"
        )
    notes += results.notes
    series = [
        Series(
            "Admission throughput (deliveries/s, median)",
            "median deliveries/s",
            [SHORT.get(str(r[0]), str(r[0])) for r in rows if results.rates.get(str(r[0]))],
            [s.median for s in _spreads(results, [str(r[0]) for r in rows])],
            kind="bar",
            ylabel="deliveries/s",
        )
    ]
    return Section(
        order=1,
        title="Admission throughput",
        intro=(
            "Deliveries admitted per second from a backlog already on the topic, exactly-once "
            "on, by 1 and 2 `sluicegate processor` instances, beside the limit (a bare "
            "confluent-kafka transactional consume-produce loop writing per input what "
            "admission writes per delivery, with the processor's batch of 2,000 and commit "
            "interval of 100 ms), the ceiling (the admission core alone, deciding the same "
            "records on one thread with no Kafka client or state store), Postgres `INSERT ... "
            "ON CONFLICT DO NOTHING` admission and DBOS Transact."
        ),
        tables=tables,
        notes=notes,
        series=series,
        targets=targets,
    )


@dataclass(frozen=True)
class _Usage:
    cores: Spread
    per_delivery_us: Spread
    waited_ms: Spread
    broker_cores: Spread | None
    broker_us: Spread | None

    def cells(self) -> list[Cell]:
        return [
            self.cores.shown(2),
            self.per_delivery_us.shown(),
            self.waited_ms.shown(),
            "-" if self.broker_cores is None else self.broker_cores.shown(2),
            "-" if self.broker_us is None else self.broker_us.shown(),
        ]


def _usage(results: Results, name: str) -> _Usage | None:
    """The spreads of what ``name``'s good runs used (None when none was metered)."""
    runs = results.cpu.get(name)
    deliveries = results.deliveries.get(name)
    if not runs or not deliveries:
        return None
    brokered = [u for u in runs if "broker" in u]
    return _Usage(
        spread([u["processor"] / u["seconds"] / u["instances"] for u in runs]),
        spread([u["processor"] / deliveries * 1e6 for u in runs]),
        spread([u["loop_waited"] / u["seconds"] / u["instances"] * 1000 for u in runs]),
        spread([u["broker"] / u["seconds"] for u in brokered]) if brokered else None,
        spread([u["broker"] / deliveries * 1e6 for u in brokered]) if brokered else None,
    )


def _spreads(results: Results, names: list[str]) -> list[Spread]:
    return [spread(results.rates[n]) for n in names if results.rates.get(n)]
