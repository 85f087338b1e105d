#!/usr/bin/env python3
"""Measure the projector and the rebuild on the local stack.

``python scripts/bench/projector_rebuild.py --occurrences 5000`` writes a history made by the
real admission core (``tests/support/history.py``) under a fresh topic prefix, projects it,
rebuilds and verifies it, prints the timings and removes everything again (topics and
schemas) unless ``--keep`` is given.
"""

from __future__ import annotations

import argparse
import io
import random
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from projections.projector import Projector  # noqa: E402
from projections.rebuild import rebuild  # noqa: E402
from streams.kafka.topics import ensure_topics  # noqa: E402
from tests.support.history import build_history, cleanup, produce_history  # noqa: E402
from tests.support.kafka import unique_settings  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--occurrences", type=int, default=5000)
    parser.add_argument("--batch-size", type=int, default=2000)
    parser.add_argument("--keep", action="store_true", help="keep the topics and schemas")
    args = parser.parse_args()
    settings = unique_settings(partitions=6)
    ensure_topics(settings)
    rng = random.Random(1)
    try:
        history = build_history(rng, args.occurrences)
        started = time.monotonic()
        produce_history(settings, history, rng=rng, transaction_size=1000, abort_every=10)
        produced = time.monotonic() - started
        print(f"prefix {settings.topic_prefix}: {len(history)} events produced in {produced:.1f} s")

        with Projector(settings, batch_size=args.batch_size) as projector:
            started = time.monotonic()
            projector.run_until(timeout_s=600)
            took = time.monotonic() - started
        print(
            f"projector: {projector.stats.messages} events in {took:.2f} s = "
            f"{projector.stats.messages / took:,.0f} events/s ({projector.stats.batches} batches)"
        )
        result = rebuild(settings, stream=io.StringIO())
        print(f"rebuild + swap: {result.messages} events in {result.seconds:.2f} s")
        verified = rebuild(settings, verify=True, stream=io.StringIO())
        print(
            f"rebuild --verify: {verified.messages} events in {verified.seconds:.2f} s, "
            f"{len(verified.differences)} differences"
        )
    finally:
        if not args.keep:
            cleanup(settings)


if __name__ == "__main__":
    main()
