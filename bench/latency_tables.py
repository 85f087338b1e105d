"""Section 2's measurements and the tables made of them (pure).

:class:`Measured` is one offered rate of one run; the functions turn runs of them into the
section's tables: percentiles per rate, the CPU each process used, the processor's
transactions, the webhook's answers, and the same on fewer partitions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from bench.results import Cell, Spread, Table, percentile, spread

PERCENTILES = (("p50", 50.0), ("p99", 99.0), ("p99.9", 99.9))
SUSTAINED_LATE_SHARE = 0.1
RATE_COLUMNS = ["offered /s", "p50", "p99", "p99.9", "runs sustained", "never arrived"]
"""The columns of :func:`rate_rows`."""


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
    answered_ms: list[float] = field(default_factory=list)
    """Sorted times (ms) from each scheduled send to its HTTP answer (the webhook only)."""
    waited: dict[str, float] | None = None
    """Seconds per second each part spent runnable but waiting for a CPU while this rate ran
    (:func:`bench.cpu.wait_seconds`), by :data:`WAIT_COLUMNS`."""

    @property
    def sustained(self) -> bool:
        duration = self.sent / self.rate
        return self.missing == 0 and self.late_s <= SUSTAINED_LATE_SHARE * max(duration, 1.0)

    @property
    def achieved(self) -> float:
        return self.sent / (self.sent / self.rate + max(self.late_s, 0.0))

    def at(self, p: float) -> float:
        return percentile(self.latencies_ms, p) if self.latencies_ms else float("nan")

    def answered_at(self, p: float) -> float:
        return percentile(self.answered_ms, p) if self.answered_ms else float("nan")

    @property
    def ingest_us_per_post(self) -> float | None:
        """The ingest process's CPU per post while this rate was sent, in microseconds."""
        if not self.cores or "ingest" not in self.cores or not self.counted_s or not self.sent:
            return None
        return self.cores["ingest"] * self.counted_s * 1e6 / self.sent

    def summary(self) -> str:
        shown = " ".join(f"{n}={self.at(p):.1f} ms" for n, p in PERCENTILES)
        tail = "" if self.sustained else f" NOT SUSTAINED (achieved {self.achieved:,.0f}/s)"
        if self.refused:
            tail += f", {self.refused} refused"
        if self.cores:
            tail += "; cores: " + ", ".join(f"{n} {c:.2f}" for n, c in self.cores.items())
        if self.waited:
            tail += "; waited for a CPU: " + ", ".join(
                f"{n} {w * 1000:.0f} ms/s" for n, w in self.waited.items()
            )
        return f"{shown}, {len(self.latencies_ms)} of {self.sent}{tail}"


def window_s(rate: float, *, longest: float, shortest: float, samples: int) -> float:
    """Seconds to send ``rate``/s for: long enough for ``samples`` records, within
    [``shortest``, ``longest``] (``longest`` wins when the two cross)."""
    return min(longest, max(shortest, samples / rate))


def windows_shown(runs: list[list[Measured]]) -> str:
    """How long each rate was sent, as measured (``sent / rate``): "10 s at 200/s, 5 s at
    1,000/s" (one figure when every rate was sent equally long)."""
    sent = {m.rate: m.sent / m.rate for run in runs for m in run}
    if len({round(s, 1) for s in sent.values()}) == 1:
        return f"{next(iter(sent.values())):.0f} s per rate"
    return ", ".join(f"{s:.0f} s at {r:,.0f}/s" for r, s in sorted(sent.items()))


def spread_at(runs: list[list[Measured]], rate: float, p: float) -> Spread | None:
    values = [m.at(p) for run in runs for m in run if m.rate == rate and m.latencies_ms]
    return spread(values) if values else None


def rate_rows(runs: list[list[Measured]], rates: list[float]) -> list[list[Cell]]:
    rows: list[list[Cell]] = []
    for rate in rates:
        measured = [m for run in runs for m in run if m.rate == rate]
        cells: list[Cell] = [f"{rate:,.0f}"]
        for _name, p in PERCENTILES:
            s = spread_at(runs, rate, p)
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


def _by_part(
    figures: list[dict[str, float]], columns: tuple[str, ...], shown: Callable[[list[float]], str]
) -> list[Cell]:
    """One cell per column: ``shown`` of that part's figures over the runs, ``-`` if none."""
    cells: list[Cell] = []
    for name in columns:
        values = [f[name] for f in figures if name in f]
        cells.append(shown(values) if values else "-")
    return cells


def cpu_table(webhook: list[list[Measured]], rates: list[float], cores: int) -> Table | None:
    """CPU used by each process while the webhook ran, per offered rate (median of runs):
    what the latency of a rate near the machine's capacity is made of."""
    rows: list[list[Cell]] = []
    for rate in rates:
        used = [m.cores for run in webhook for m in run if m.rate == rate and m.cores]
        if used:
            total = spread([sum(u.values()) for u in used]).median
            cells = _by_part(used, CPU_COLUMNS, lambda v: f"{spread(v).median:.2f}")
            rows.append([f"{rate:,.0f}", *cells, f"{total:.2f} of {cores}"])
    if not rows:
        return None
    return Table(
        "CPU used while the webhook ran (cores, median of runs)",
        ["offered /s", *CPU_COLUMNS, "together"],
        rows,
    )


WAIT_COLUMNS = ("ingest loop", "processor loop", "broker", "benchmark process")
"""The ingest's and the processor's main threads (where their loops run), the broker's and
the benchmark process's threads together."""
WAIT_TITLE = "Waiting for a CPU while the webhook ran (median of runs, min to max)"


def wait_table(webhook: list[list[Measured]], rates: list[float]) -> Table | None:
    """How long each part waited, runnable, for a CPU while the webhook ran, per offered rate
    (median of runs): how long the loops could not run because the cores were busy."""
    rows: list[list[Cell]] = []
    for rate in rates:
        waited = [m.waited for run in webhook for m in run if m.rate == rate and m.waited]
        if waited:
            ms = [{name: w * 1000 for name, w in each.items()} for each in waited]
            rows.append([f"{rate:,.0f}", *_by_part(ms, WAIT_COLUMNS, lambda v: spread(v).shown(0))])
    if not rows:
        return None
    return Table(WAIT_TITLE, ["offered /s", *(f"{c} (ms/s)" for c in WAIT_COLUMNS)], rows)


def transactions_table(
    webhook: list[list[Measured]],
    rates: list[float],
    title: str = "The processor's transactions while the webhook ran",
) -> Table | None:
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
        f"{title} (median of runs, min to max)",
        [
            "offered /s",
            "transactions/s",
            "deliveries per transaction",
            "broker CPU per transaction",
        ],
        rows,
    )


def answers_table(webhook: list[list[Measured]], rates: list[float]) -> Table | None:
    """When the webhook answered each post (its 202: the delivery written to ``deliveries``
    and acknowledged), per offered rate, beside when its ``RunAdmitted`` became visible: how
    much of a rate's latency is spent before the processor sees the delivery at all."""
    rows: list[list[Cell]] = []
    for rate in rates:
        answered = [m for run in webhook for m in run if m.rate == rate and m.answered_ms]
        if not answered:
            continue
        cells: list[Cell] = [f"{rate:,.0f}"]
        for _name, p in PERCENTILES:
            cells.append(spread([m.answered_at(p) for m in answered]).shown(1, " ms"))
        shares = [m.answered_at(50) / m.at(50) for m in answered if m.latencies_ms and m.at(50)]
        cells.append(f"{100 * spread(shares).median:.0f}%" if shares else "-")
        cpu = [us for m in answered if (us := m.ingest_us_per_post) is not None]
        cells.append(spread(cpu).shown(0, " us") if cpu else "-")
        rows.append(cells)
    if not rows:
        return None
    return Table(
        "Webhook POST to its answer (202: written to `deliveries`, acknowledged)",
        [
            "offered /s",
            "p50",
            "p99",
            "p99.9",
            "answer p50 / visible p50",
            "ingest CPU per post",
        ],
        rows,
    )


def fewer_tables(partitions: int, runs: list[list[Measured]]) -> list[Table]:
    """The webhook's latency and the processor's transactions on ``partitions`` per topic."""
    rates = sorted({m.rate for run in runs for m in run})
    each = "partition" if partitions == 1 else "partitions"
    tables = [
        Table(
            f"Webhook POST to RunAdmitted visible, {partitions} {each} per topic",
            RATE_COLUMNS,
            rate_rows(runs, rates),
        )
    ]
    committed = transactions_table(
        runs, rates, f"The processor's transactions, {partitions} {each} per topic"
    )
    if committed is not None:
        tables.append(committed)
    return tables
