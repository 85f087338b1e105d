"""DBOS Transact admission: one durable workflow per delivery, the admission key its id.

Run as its own process (DBOS is a process-wide singleton):
``python -m bench.dbos_admission DSN SCHEMA DELIVERIES_JSON SLOTS`` prints one JSON object
(``seconds``, ``handles``, ``workflows``, ``launches``). Each delivery starts workflow
``admit`` with ``SetWorkflowID(admission_key)``: DBOS starts a workflow id once, and a
duplicate gets the handle of the existing one (its outcome: deduplicated). The workflow runs
one step per slot (the launches). The clock runs from the first start until every workflow's
result is in; the counts are then read from DBOS's own tables in ``SCHEMA`` (its system
schema, which the caller drops).
"""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path

import psycopg
from dbos import DBOS, DBOSConfig, SetWorkflowID


@DBOS.step()
def launch(admission_key: str, slot: str) -> str:
    return f"{admission_key}/{slot}"


@DBOS.workflow()
def admit(admission_key: str, slots: list[str]) -> int:
    for slot in slots:
        launch(admission_key, slot)
    return len(slots)


def main(argv: list[str]) -> int:
    dsn, schema, path, slots_arg = argv
    deliveries: list[list[str]] = json.loads(Path(path).read_text())
    slots = slots_arg.split(",")
    config: DBOSConfig = {
        "name": "sluicegate-bench",
        "system_database_url": dsn,
        "dbos_system_schema": schema,
        "log_level": "WARNING",
    }
    logging.getLogger("dbos").setLevel(logging.WARNING)
    DBOS(config=config)
    DBOS.launch()
    started = time.monotonic()
    handles = {}
    for admission_key, _delivery_id in deliveries:
        with SetWorkflowID(admission_key):
            handles[admission_key] = DBOS.start_workflow(admit, admission_key, slots)
    starts = len(deliveries)
    for handle in handles.values():
        handle.get_result()
    seconds = time.monotonic() - started
    DBOS.destroy()
    with psycopg.connect(dsn) as conn:
        workflows = conn.execute(
            f"SELECT count(*) FROM {schema}.workflow_status WHERE status = 'SUCCESS'".encode()
        ).fetchone()
        launches = conn.execute(
            f"SELECT count(*) FROM {schema}.operation_outputs WHERE function_name LIKE %s".encode(),
            ("%launch%",),
        ).fetchone()
    assert workflows is not None and launches is not None
    result = {
        "seconds": seconds,
        "handles": starts,
        "workflows": workflows[0],
        "launches": launches[0],
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
