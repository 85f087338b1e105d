"""Section 2's figures: latency percentiles per offered rate, webhook beside the bare round trip.

Pure: :func:`section` turns the measured runs (:mod:`bench.latency_tables`) into tables, the
issue's target (webhook p99 at 1,000/s at most 3 x the bare round trip's), notes and plot
series.
"""

from __future__ import annotations

from bench.latency_tables import (
    PERCENTILES,
    RATE_COLUMNS,
    Measured,
    answers_table,
    cpu_table,
    fewer_tables,
    rate_rows,
    spread_at,
    transactions_table,
    wait_table,
    windows_shown,
)
from bench.results import Cell, Section, Series, Table, Target, spread


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


RELAY_TITLE = "Exactly-once floor: bare transactional relay, produce to read_committed visible"
RELAY_NOTE = (
    "Exactly-once floor (`bench/relay.py`): what an exactly-once consume-transform-produce "
    "loop that decides nothing costs a record's latency on this broker. Its own process reads "
    "an input topic read_committed and, per record, writes about what admission writes per "
    "delivery (1 record on a runs-like topic, the one timed, 2 on a tasks-like and 2 on a "
    "changelog-like topic, in the input's partition), committing the consumed offsets in the "
    "same transaction, the processor's way: the same client factories and tuning, what has "
    "arrived (at most 2,000, waiting at most the 100 ms commit interval for the first), then "
    "produce, add the offsets, commit. The records are sent as the bare round trip's are "
    "(idempotent, acks=all, linger 2 ms, open-loop) and timed until a read_committed "
    "consumer sees the relayed record. Between the floor and the bare round trip is what a "
    "transaction costs on this broker (registering its partitions and offsets, the "
    "two-phase commit, a marker in every partition written, all before a read_committed "
    "consumer may see a record); between the webhook and the floor, what Sluicegate adds "
    "(the HTTP front door, deciding, state)."
)


def ratio_table(
    title: str, over: list[list[Measured]], under: list[list[Measured]], rates: list[float]
) -> Table:
    """``over`` / ``under`` per rate and percentile (medians of the runs)."""
    rows: list[list[Cell]] = []
    for rate in rates:
        cells: list[Cell] = [f"{rate:,.0f}"]
        for _name, p in PERCENTILES:
            o, u = spread_at(over, rate, p), spread_at(under, rate, p)
            cells.append(f"{o.median / u.median:.1f} x" if o and u and u.median else "-")
        rows.append(cells)
    return Table(title, ["offered /s", "p50", "p99", "p99.9"], rows)


def floor_shown(relay: list[list[Measured]] | None, bare_p99: float, allowed: float) -> str:
    """For the target's 'by': the exactly-once floor's own p99 at 1,000/s against what the
    target allows, when it was measured."""
    floor = spread_at(relay, 1000.0, 99.0) if relay else None
    if floor is None or not bare_p99:
        return ""
    verdict = "over" if floor.median > allowed else "within"
    return (
        f"; the exactly-once floor alone: {floor.median:.1f} ms = "
        f"{floor.median / bare_p99:.1f} x bare, {verdict} the allowance"
    )


def loops_waited(webhook: list[list[Measured]]) -> str:
    """For the target's 'by': how long the ingest's and the processor's loops waited for a
    CPU at 1,000/s (medians), when that was measured."""
    waited = [m.waited for run in webhook for m in run if m.rate == 1000.0 and m.waited]
    shares = {
        name: spread([w[name] for w in waited if name in w]).median
        for name in ("ingest loop", "processor loop")
        if any(name in w for w in waited)
    }
    if len(shares) < 2:
        return ""
    return (
        f"; meanwhile the ingest's event loop waited {shares['ingest loop'] * 1000:.0f} ms/s "
        f"for a CPU and the processor's loop {shares['processor loop'] * 1000:.0f} ms/s"
    )


def section(
    webhook: list[list[Measured]],
    bare: list[list[Measured]],
    gate: list[Measured] | None = None,
    cores: int = 2,
    *,
    fewer: tuple[int, list[list[Measured]]] | None = None,
    relay: list[list[Measured]] | None = None,
) -> Section:
    """``fewer``: (partitions per topic, runs) of the webhook measured again on fewer
    partitions than ``webhook`` was; ``relay``: the exactly-once floor (:mod:`bench.relay`)
    at the same rates."""
    rates = sorted({m.rate for run in webhook for m in run})
    columns = RATE_COLUMNS
    tables = [
        Table(
            "Webhook POST to RunAdmitted visible (read_committed)",
            columns,
            rate_rows(webhook, rates),
        ),
        Table("Bare produce to read_committed consume round trip", columns, rate_rows(bare, rates)),
    ]
    if relay:
        tables.append(Table(RELAY_TITLE, columns, rate_rows(relay, rates)))
    answers = answers_table(webhook, rates)
    if answers is not None:
        tables.append(answers)
    used = cpu_table(webhook, rates, cores)
    if used is not None:
        tables.append(used)
    waited = wait_table(webhook, rates)
    if waited is not None:
        tables.append(waited)
    committed = transactions_table(webhook, rates)
    if committed is not None:
        tables.append(committed)
    if fewer is not None:
        tables.extend(fewer_tables(*fewer))
    tables.append(ratio_table("Webhook / bare (medians)", webhook, bare, rates))
    if relay:
        tables.append(ratio_table("Webhook / exactly-once floor (medians)", webhook, relay, rates))
    if gate:
        gate_rate = gate[0].rate
        tables.append(
            Table(
                "The gate: DispatchRequested to ActionDispatched visible (read_committed)",
                columns,
                rate_rows([[m] for m in gate], [gate_rate]),
            )
        )
    targets = []
    w99, b99 = spread_at(webhook, 1000.0, 99.0), spread_at(bare, 1000.0, 99.0)
    if w99 and b99:
        allowed = 3 * b99.median
        targets.append(
            Target(
                "p99 admission latency at 1,000/s",
                "<= 3 x the bare round trip's p99",
                f"{w99.median:.1f} ms = {w99.median / b99.median:.1f} x ({b99.median:.1f} ms bare)",
                w99.median <= allowed,
                f"{w99.median - allowed:+.1f} ms against {allowed:.1f} ms allowed"
                + floor_shown(relay, b99.median, allowed)
                + loops_waited(webhook),
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
        f"Open-loop: {windows_shown(webhook)}, send times fixed in advance and latency taken "
        "from the scheduled time, so a sender that falls behind counts as latency. Every post "
        "is a new occurrence (a RunAdmitted each).",
        "One `sluicegate ingest` and one `sluicegate processor` (default batch and commit "
        "interval), each its own process; the HTTP client and the read_committed tail "
        "consumers run in the benchmark process, on the same 2 cores. The client "
        "(`bench/http_client.py`) posts prepared bytes over kept-alive HTTP/1.1 connections, "
        "one request at a time each, up to 256 open: aiohttp's client, used before, took "
        "0.35 cores at 1,000 posts/s from the cores under test, this one about half that "
        "(the 'benchmark process' column below).",
        "A rate is 'sustained' in a run when every record became visible, the last of them at "
        "most 10% of the duration after the last scheduled send; otherwise the table gives the "
        "rate at which records became visible (sent / (duration + that delay)).",
    ]
    notes.append(sustained_note(webhook, rates))
    if answers is not None:
        notes.append(
            "Answers: the time from each post's scheduled send to the webhook's answer, read "
            "by the client. Where the answer is most of the visible latency, the posts queued "
            "in front of the processor: in the ingest process (one event loop: reading the "
            "request, checking and encoding the delivery, producing it, waiting for the "
            "broker's acknowledgement, answering, the access log line) and in the HTTP client, "
            "both on the cores the processor and broker use. Ingest CPU per post: the ingest "
            "process's CPU over the rate's run divided by the posts sent."
        )
    if used is not None:
        notes.append(
            "CPU: user + system time of each process over the rate's run, per second (the "
            "broker's only when it runs on this machine; 'benchmark process' is the HTTP client "
            "and the tail consumers). A rate whose processes together use most of the cores "
            "queues behind the CPU, which the percentiles of that rate include."
        )
    if waited is not None:
        notes.append(
            "Waiting for a CPU: from each thread's `/proc/<pid>/task/<tid>/schedstat` (its "
            "second field, the time it was runnable while another thread had the core), over "
            "the rate's run, per second. 'ingest loop' and 'processor loop' are their main "
            "threads, where the webhook's event loop and the processor's loop run: a loop "
            "that waited 300 ms/s was ready to run but not running for 30% of the rate's "
            "run, and every post it had in hand waited with it. The broker and the benchmark "
            "process are summed over their threads (above 1,000 ms/s when several wait at "
            "once). It shows how much of the run the loops could not work because the cores "
            "were busy elsewhere, which the percentiles alone do not tell apart from a slow "
            "step."
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
    if fewer is not None:
        notes.append(
            f"Fewer partitions: in each run, after the rates above, one more `sluicegate "
            f"ingest` and `sluicegate processor` on fresh topics of {fewer[0]} partition(s) "
            "each, at the rates up to 1,000/s. A transaction registers every partition it "
            "writes with the transaction coordinator and commits a marker in each of them "
            "(changelog, runs and tasks: up to three per input partition), and each marker "
            "wakes the consumers of that partition; with fewer partitions a transaction "
            "touches fewer, so it costs the broker less (the transactions table beside it). "
            "Whether that shortens the latency depends on what else waits for the cores: "
            "compare the two tables' spreads before reading a difference in. Partitions are the "
            "unit of parallelism (at most one processor instance per partition) and cannot be "
            "changed once a deployment has state: choose them for the instances you will run."
        )
    if relay:
        notes.append(RELAY_NOTE)
    if gate:
        notes.append(
            "The gate: one `sluicegate gate` process; each sample is its own decision scope, its "
            "CandidateProposed sent 0.5 s before the DispatchRequested whose latency is timed, "
            f"{gate[0].rate:,.0f} requests/s offered for "
            f"{gate[0].sent / gate[0].rate:.0f} s, open-loop."
        )
    series = []
    plotted = [("webhook", webhook), ("bare", bare)]
    if relay:
        plotted.append(("exactly-once floor", relay))
    for name, runs in plotted:
        for label, p in PERCENTILES[:2]:
            ys = [spread_at(runs, r, p) for r in rates]
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
            "the same broker at the same rates and beside the exactly-once floor (the same "
            "records through a bare transactional relay that decides nothing)."
        ),
        tables=tables,
        notes=notes,
        series=series,
        targets=targets,
    )
