"""What a benchmark section was measured on: cores, RAM, and the Python, Kafka and PostgreSQL
versions. Each section's results carry it (:func:`bench.results.write` stamps it), so a page
rendered from sections measured on different machines says which ran where."""

from __future__ import annotations

import os
import platform
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Machine:
    """What the figures were measured on."""

    cores: int
    ram_gib: float
    python: str
    kafka: str
    postgres: str

    def described(self) -> str:
        return (
            f"{self.cores} cores, {self.ram_gib:.1f} GiB, Python {self.python}, "
            f"Kafka {self.kafka}, PostgreSQL {self.postgres}"
        )


def machine_facts(pg_dsn: str | None = None) -> Machine:
    """This machine's facts; a version that cannot be read is shown as ``unknown``."""
    return Machine(
        cores=os.cpu_count() or 0,
        ram_gib=_ram_gib(),
        python=platform.python_version(),
        kafka=_kafka_version(),
        postgres=_postgres_version(pg_dsn),
    )


def _ram_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1024 / 1024
    except OSError:
        pass
    return 0.0


def _kafka_version() -> str:
    """The broker version the local stack runs (``scripts/kafka/pom.xml``)."""
    try:
        pom = (ROOT / "scripts" / "kafka" / "pom.xml").read_text()
    except OSError:
        return "unknown"
    found = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", pom)
    return found.group(1) if found else "unknown"


def _postgres_version(pg_dsn: str | None) -> str:
    try:
        import psycopg

        from streams.settings import load_settings

        dsn = pg_dsn or load_settings().pg_dsn
        with psycopg.connect(dsn, connect_timeout=5) as conn:
            row = conn.execute("SHOW server_version").fetchone()
        return str(row[0]) if row else "unknown"
    except Exception:  # a report still renders without the database
        return "unknown"
