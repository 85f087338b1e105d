#!/usr/bin/env python3
"""Latency of a place + query round trip through a venue adapter.

``python scripts/bench/venue_latency.py --spawn`` starts a paper venue on a free port with a fresh
state directory (default configuration), then places ``--n`` small MARKET orders one after the
other, querying each by client order id, and prints p50/p90/p99/max in milliseconds for the
placement, the query and the pair. ``--url`` measures a venue that is already running instead.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from decimal import Decimal

from consumers.venue.adapter import Accepted, Attempt, OrderRequest, OrderType, Side, VenueAdapter
from consumers.venue.binance_spot import BinanceSpotClient
from consumers.venue.paper import PaperVenueClient


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def measure(
    adapter: VenueAdapter, n: int, symbol: str, quantity: Decimal
) -> dict[str, list[float]]:
    """Milliseconds per placement, per query and per pair, for ``n`` sequential pairs."""
    run = f"bench-{time.time_ns() % 10**9}"
    times: dict[str, list[float]] = {"place": [], "query": [], "place+query": []}
    for i in range(n):
        order = OrderRequest(symbol, Side.BUY, OrderType.MARKET, f"{run}-{i}", quantity=quantity)
        started = time.perf_counter()
        placed = adapter.place(order, Attempt(time.time_ns() // 1_000_000))
        middle = time.perf_counter()
        found = adapter.query(symbol, order.client_order_id, Attempt(time.time_ns() // 1_000_000))
        ended = time.perf_counter()
        if not isinstance(placed, Accepted) or not isinstance(found, Accepted):
            raise SystemExit(f"order {i}: {placed} / {found}")
        times["place"].append((middle - started) * 1000)
        times["query"].append((ended - middle) * 1000)
        times["place+query"].append((ended - started) * 1000)
    return times


def _spawn(state: str) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "consumers.paper_venue",
            "--http",
            f"127.0.0.1:{port}",
            "--state-dir",
            state,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            urllib.request.urlopen(f"{url}/api/v3/ping", timeout=1).close()
            return process, url
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise SystemExit("the paper venue did not start")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/bench/venue_latency.py", description=__doc__)
    parser.add_argument("--url", default="http://127.0.0.1:8090")
    parser.add_argument("--spawn", action="store_true", help="start a paper venue for the run")
    parser.add_argument("--adapter", choices=["binance", "paper", "both"], default="both")
    parser.add_argument("--api-key", default="paper-api-key")
    parser.add_argument("--api-secret", default="paper-api-secret")
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--symbol", default="BTCUSDT")
    parser.add_argument("--quantity", default="0.0001")
    args = parser.parse_args(argv)
    state = tempfile.mkdtemp(prefix="venue-bench-")
    process, url = _spawn(state) if args.spawn else (None, args.url)
    try:
        kinds = ["binance", "paper"] if args.adapter == "both" else [args.adapter]
        for kind in kinds:
            adapter: VenueAdapter = (
                BinanceSpotClient(url, args.api_key, args.api_secret)
                if kind == "binance"
                else PaperVenueClient(url, args.api_key, args.api_secret)
            )
            times = measure(adapter, args.n, args.symbol, Decimal(args.quantity))
            adapter.close()
            for name, samples in times.items():
                print(
                    f"{adapter.name:13} {name:12} n={len(samples)} "
                    + " ".join(
                        f"{label}={percentile(samples, q):.2f}ms"
                        for label, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("max", 1.0))
                    )
                )
    finally:
        if process is not None:
            process.terminate()
            process.wait(10)
        shutil.rmtree(state, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
