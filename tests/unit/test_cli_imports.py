"""Starting ``sluicegate`` imports only what the chosen command needs.

``sluicegate publish`` run once per alert from a script, or ``sluicegate --help``, paid for
importing every component (the engine, RocksDB, PostgreSQL's driver, the HTTP server):
about 0.6 s per start on 2 cores. Each command module imports its heavy dependencies when
its command runs.
"""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = (
    "psycopg",
    "aiohttp",
    "rocksdict",
    "sluicegate.bootstrap",
    "streams.engine.processor",
    "http.server",
)


def imported_after(code: str) -> set[str]:
    probe = f"{code}\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_building_the_parser_imports_no_component() -> None:
    modules = imported_after("from sluicegate.cli import build_parser; build_parser()")
    assert not modules & set(HEAVY)


def test_the_composition_root_imports_a_component_only_when_building_it() -> None:
    modules = imported_after("import sluicegate.bootstrap")
    others = {"psycopg", "aiohttp", "projections.projector", "consumers.gateway.app"}
    assert not modules & (others | {"consumers.branch_worker", "streams.apps.gate"})
