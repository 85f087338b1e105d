"""``python -m bench.run``: every benchmark section, then the report (what ``make bench`` runs).

Each section ``bench/<name>.py`` runs as its own process
(``python -m bench.<name> --runs N --out docs/benchmarks/<name>.json``), one after another, so one
section's processes never compete with another's for the machine's cores. A section whose
module does not exist is skipped with a message; a section that fails is reported and the
others still run; the report is rendered from whatever results exist. The exit status is
non-zero if any section that exists failed. First, the topics and state that benchmark runs
killed before cleaning up left on the broker are deleted (no other benchmark may be running).
Last, every figure is compared with the results the run replaced (:mod:`bench.compare`):
printed, and written to ``var/bench/changes.txt``.

Environment: ``BENCH_RUNS`` (default 3) runs per figure, ``BENCH_SECTIONS`` (comma-separated
names, default all) to run only some; each section documents its own scale knobs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from bench import compare
from bench.backlog import remove_stale_stages
from bench.results import Section, read
from streams.settings import load_settings

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = ("admission", "latency", "projection", "recovery")


def main() -> int:
    runs = os.environ.get("BENCH_RUNS", "3")
    chosen = [s.strip() for s in os.environ.get("BENCH_SECTIONS", ",".join(SECTIONS)).split(",")]
    out = ROOT / "docs" / "benchmarks"  # committed with the page it renders (bench.report)
    out.mkdir(parents=True, exist_ok=True)
    removed = remove_stale_stages(load_settings())
    if removed:
        # Each leftover holds partitions, compacted changelogs and disk on the shared broker.
        print(f"bench: deleted {removed} topics left by interrupted benchmark runs", flush=True)
    replaced = _results(out)
    failed: list[str] = []
    for name in (s for s in SECTIONS if s in chosen):
        if not (ROOT / "bench" / f"{name}.py").exists():
            print(f"bench: section {name} skipped (bench/{name}.py does not exist)", flush=True)
            continue
        print(f"bench: section {name} ...", flush=True)
        started = time.monotonic()
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                f"bench.{name}",
                "--runs",
                runs,
                "--out",
                str(out / f"{name}.json"),
            ],
            cwd=ROOT,
            check=False,
        )
        took = time.monotonic() - started
        if done.returncode != 0:
            failed.append(name)
            print(f"bench: section {name} FAILED (exit {done.returncode}) after {took:.0f} s")
        else:
            print(f"bench: section {name} done in {took:.0f} s", flush=True)
    report = subprocess.run([sys.executable, "-m", "bench.report"], cwd=ROOT, check=False)
    _say_changes(replaced, _results(out), ROOT / "var" / "bench" / "changes.txt")
    if failed:
        print(f"bench: failed sections: {', '.join(failed)}")
    return 1 if failed or report.returncode != 0 else 0


def _results(out: Path) -> dict[str, Section]:
    """Every section's results in ``out`` that can be read (an unreadable one is skipped:
    the report says what it cannot render)."""
    found: dict[str, Section] = {}
    for name in SECTIONS:
        try:
            found[name] = read(out / f"{name}.json")
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return found


def _say_changes(before: dict[str, Section], after: dict[str, Section], path: Path) -> None:
    """Print what changed against ``before`` and write it to ``path``."""
    found: list[compare.Change] = []
    measured: set[str] = set()
    for name in SECTIONS:
        if name in before and name in after:
            changed = compare.changes(before[name], after[name])
            found += changed
            if changed:
                measured.add(before[name].measured)
    lines = compare.report(found, sorted(measured))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
