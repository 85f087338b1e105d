"""Section 2's figures: latency percentiles per offered rate, webhook beside the bare round trip.

Pure: :func:`section` turns the measured runs into tables, the issue's target (webhook p99 at
1,000/s at most 3 x the bare round trip's), notes and plot series.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.results import Cell, Section, Series, Spread, Table, Target, percentile, spread

PERCENTILES = (("p50", 50.0), ("p99", 99.0), ("p99.9", 99.9))
SUSTAINED_LATE_SHARE = 0.1


@dataclass(frozen=True)
class Measured:
    """One rate of one run: sorted latencies (ms) of the records that arrived."""

    rate: float
    sent: int
    latencies_ms: list[float]
    missing: int
    late_s: float
    """How long after the last scheduled send the last record became visible."""
    refused: int = 0
    """Sends answered with anything but success (counted in ``missing`` too)."""
    cores: dict[str, float] | None = None
    """CPU used while this rate ran, in cores (CPU seconds per second), by process."""
    transactions: int | None = None
    """Transactions the processor committed while this rate was sent (its SIGUSR1 counters)."""
    committed_records: int | None = None
    """Input records those transactions took."""
    counted_s: float | None = None
    """Seconds between the two readings of the counters (the sending, however long it took)."""

    @property
    def sustained(self) -> bool:
        duration = self.sent / self.rate
        return self.missing == 0 and self.late_s <= SUSTAINED_LATE_SHARE * max(duration, 1.0)

    @property
    def achieved(self) -> float:
        return self.sent / (self.sent / self.rate + max(self.late_s, 0.0))

    def at(self, p: float) -> float:
        return percentile(self.latencies_ms, p) if self.latencies_ms else float("nan")

    def summary(self) -> str:
        shown = " ".join(f"{n}={self.at(p):.1f} ms" for n, p in PERCENTILES)
        tail = "" if self.sustained else f" NOT SUSTAINED (achieved {self.achieved:,.0f}/s)"
        if self.refused:
            tail += f", {self.refused} refused"
        if self.cores:
            tail += "; cores: " + ", ".join(f"{n} {c:.2f}" for n, c in self.cores.items())
        return f"{shown}, {len(self.latencies_ms)} of {self.sent}{tail}"


def _spread_at(runs: list[list[Measured]], rate: float, p: float) -> Spread | None:
    values = [m.at(p) for run in runs for m in run if m.rate == rate and m.latencies_ms]
    return spread(values) if values else None


def _rows(runs: list[list[Measured]], rates: list[float]) -> list[list[Cell]]:
    rows: list[list[Cell]] = []
    for rate in rates:
        measured = [m for run in runs for m in run if m.rate == rate]
        cells: list[Cell] = [f"{rate:,.0f}"]
        for _name, p in PERCENTILES:
            s = _spread_at(runs, rate, p)
            cells.append(s.shown(1, " ms") if s else "-")
        kept = sum(m.sustained for m in measured)
        achieved = spread([m.achieved for m in measured]).median if measured else 0.0
        cells.append(
            f"{kept} of {len(measured)}"
            + ("" if kept == len(measured) else f" (achieved {achieved:,.0f}/s)")
        )
        refused = sum(m.refused for m in measured)
        cells.append(
            f"{sum(m.missing for m in measured)}" + (f" ({refused} refused)" if refused else "")
        )
        rows.append(cells)
    return rows


CPU_COLUMNS = ("ingest", "processor", "gate", "broker", "benchmark process")


def cpu_table(webhook: list[list[Measured]], rates: list[float], cores: int) -> Table | None:
    """CPU used by each process while the webhook ran, per offered rate (median of runs):
    what the latency of a rate near the machine's capacity is made of."""
    rows: list[list[Cell]] = []
    for rate in rates:
        used = [m.cores for run in webhook for m in run if m.rate == rate and m.cores]
        if not used:
            continue
        cells: list[Cell] = [f"{rate:,.0f}"]
        for name in CPU_COLUMNS:
            values = [u[name] for u in used if name in u]
            cells.append(f"{spread(values).median:.2f}" if values else "-")
        total = spread([sum(u.values()) for u in used]).median
        cells.append(f"{total:.2f} of {cores}")
        rows.append(cells)
    if not rows:
        return None
    return Table(
        "CPU used while the webhook ran (cores, median of runs)",
        ["offered /s", *CPU_COLUMNS, "together"],
        rows,
    )


def transactions_table(webhook: list[list[Measured]], rates: list[float]) -> Table | None:
    """The processor's transactions per offered rate (median of runs) beside the broker's CPU:
    what each exactly-once commit costs the broker, whatever it carries."""
    rows: list[list[Cell]] = []
    for rate in rates:
        counted = [
            (m, m.transactions, m.committed_records, m.counted_s)
            for run in webhook
            for m in run
            if m.rate == rate and m.transactions and m.committed_records is not None and m.counted_s
        ]
        if not counted:
            continue
        per_s = spread([txns / seconds for _m, txns, _r, seconds in counted])
        per_txn = spread([records / txns for _m, txns, records, _s in counted])
        broker = [
            m.cores["broker"] * seconds * 1000 / txns
            for m, txns, _r, seconds in counted
            if m.cores and "broker" in m.cores
        ]
        rows.append(
            [
                f"{rate:,.0f}",
                per_s.shown(0),
                per_txn.shown(1),
                spread(broker).shown(1, " ms") if broker else "-",
            ]
        )
    if not rows:
        return None
    return Table(
        "The processor's transactions while the webhook ran (median of runs, min to max)",
        [
            "offered /s",
            "transactions/s",
            "deliveries per transaction",
            "broker CPU per transaction",
        ],
        rows,
    )


def sustained_note(webhook: list[list[Measured]], rates: list[float]) -> str:
    """Which offered rates the webhook path kept up with in every run, and what that means
    for the percentiles of the others."""
    kept = [r for r in rates if all(m.sustained for run in webhook for m in run if m.rate == r)]
    best = f"{max(kept):,.0f}/s" if kept else "none of the offered rates"
    text = f"Highest offered rate the webhook path sustained in every run: {best}."
    missed = [r for r in rates if r not in kept]
    if missed:
        achieved = spread([m.achieved for run in webhook for m in run if m.rate == missed[0]])
        text += (
            f" At {missed[0]:,.0f}/s and above, admissions became visible at about "
            f"{achieved.median:,.0f}/s, so those percentiles measure the queue that built up "
            "behind the ingest and processor processes on this machine, not one delivery's path."
        )
    return text


def section(
    webhook: list[list[Measured]],
    bare: list[list[Measured]],
    seconds: float,
    gate: list[Measured] | None = None,
    cores: int = 2,
) -> Section:
    rates = sorted({m.rate for run in webhook for m in run})
    columns = ["offered /s", "p50", "p99", "p99.9", "runs sustained", "never arrived"]
    tables = [
        Table(
            "Webhook POST to RunAdmitted visible (read_committed)", columns, _rows(webhook, rates)
        ),
        Table("Bare produce to read_committed consume round trip", columns, _rows(bare, rates)),
    ]
    used = cpu_table(webhook, rates, cores)
    if used is not None:
        tables.append(used)
    committed = transactions_table(webhook, rates)
    if committed is not None:
        tables.append(committed)
    ratio_rows: list[list[Cell]] = []
    for rate in rates:
        cells: list[Cell] = [f"{rate:,.0f}"]
        for _name, p in PERCENTILES:
            w, b = _spread_at(webhook, rate, p), _spread_at(bare, rate, p)
            cells.append(f"{w.median / b.median:.1f} x" if w and b and b.median else "-")
        ratio_rows.append(cells)
    tables.append(
        Table("Webhook / bare (medians)", ["offered /s", "p50", "p99", "p99.9"], ratio_rows)
    )
    if gate:
        gate_rate = gate[0].rate
        tables.append(
            Table(
                "The gate: DispatchRequested to ActionDispatched visible (read_committed)",
                columns,
                _rows([[m] for m in gate], [gate_rate]),
            )
        )
    targets = []
    w99, b99 = _spread_at(webhook, 1000.0, 99.0), _spread_at(bare, 1000.0, 99.0)
    if w99 and b99:
        allowed = 3 * b99.median
        targets.append(
            Target(
                "p99 admission latency at 1,000/s",
                "<= 3 x the bare round trip's p99",
                f"{w99.median:.1f} ms = {w99.median / b99.median:.1f} x ({b99.median:.1f} ms bare)",
                w99.median <= allowed,
                f"{w99.median - allowed:+.1f} ms against {allowed:.1f} ms allowed",
            )
        )
    else:
        targets.append(
            Target(
                "p99 admission latency at 1,000/s",
                "<= 3 x the bare round trip's p99",
                "not measured",
                False,
                "1,000/s was not among the rates",
            )
        )
    notes = [
        f"Open-loop: {seconds:.0f} s per rate, send times fixed in advance and latency taken from "
        "the scheduled time, so a sender that falls behind counts as latency. Every post is a "
        "new occurrence (a RunAdmitted each).",
        "One `sluicegate ingest` and one `sluicegate processor` (default batch and commit "
        "interval), each its own process; the aiohttp client and the read_committed tail "
        "consumers run in the benchmark process, on the same 2 cores.",
        "A rate is 'sustained' in a run when every record became visible, the last of them at "
        "most 10% of the duration after the last scheduled send; otherwise the table gives the "
        "rate at which records became visible (sent / (duration + that delay)).",
    ]
    notes.append(sustained_note(webhook, rates))
    if used is not None:
        notes.append(
            "CPU: user + system time of each process over the rate's run, per second (the "
            "broker's only when it runs on this machine; 'benchmark process' is the HTTP client "
            "and the tail consumers). A rate whose processes together use most of the cores "
            "queues behind the CPU, which the percentiles of that rate include."
        )
    if committed is not None:
        notes.append(
            "Transactions: the processor's own counters (`kill -USR1`, logged as `counters:`) "
            "read just before and just after each rate was sent. Broker CPU per transaction is "
            "all of the broker's CPU in that time (the ingest's produce requests and every "
            "consumer's fetches included) divided by the transactions the processor committed. "
            "Besides its records, every transaction costs the broker requests of its own "
            "(registering its partitions and the consumed offsets, the two-phase commit, a "
            "marker in every partition written); at low rates a transaction carries a few "
            "deliveries, so the broker takes more CPU than Sluicegate's processes together, "
            "and a rate's latency includes waiting for it."
        )
    if gate:
        notes.append(
            "The gate: one `sluicegate gate` process; each sample is its own decision scope, its "
            "CandidateProposed sent 0.5 s before the DispatchRequested whose latency is timed, "
            f"{gate[0].rate:,.0f} requests/s offered for {seconds:.0f} s, open-loop."
        )
    series = []
    for name, runs in (("webhook", webhook), ("bare", bare)):
        for label, p in PERCENTILES[:2]:
            ys = [_spread_at(runs, r, p) for r in rates]
            series.append(
                Series(
                    "Latency by offered rate (ms, median of runs)",
                    f"{name} {label}",
                    [f"{r:,.0f}/s" for r in rates],
                    [y.median if y else float("nan") for y in ys],
                    kind="line",
                    xlabel="offered deliveries/s",
                    ylabel="ms",
                )
            )
    return Section(
        order=2,
        title="Latency",
        intro=(
            "Time from a webhook POST to its `RunAdmitted` being visible to a read_committed "
            "consumer, at fixed offered rates, beside the bare produce-to-consume round trip on "
            "the same broker at the same rates."
        ),
        tables=tables,
        notes=notes,
        series=series,
        targets=targets,
    )
