"""Postgres admission: ``INSERT ... ON CONFLICT DO NOTHING`` on a unique admission key.

Per delivery, in one transaction: insert the run (unique on the admission key; the insert
that wins admits, the others are duplicates), insert one launch row per slot for an admitted
run, and insert the delivery's outcome (unique on the delivery id). Two ways:

- :func:`per_delivery`: one transaction per delivery, from ``connections`` connections (each
  takes every ``connections``-th delivery; a duplicate racing its original on another
  connection waits on the unique index, as it would in production);
- :func:`batched`: one connection, ``batch`` deliveries per transaction, each table written
  by one statement over arrays (``unnest``).

Tables live in a schema of their own (``bench_<hex>``), dropped by :meth:`Tables.close`.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass

import psycopg

from bench.backlog import Delivery

DDL = """
CREATE SCHEMA {s};
CREATE TABLE {s}.runs (
  admission_key text PRIMARY KEY, run_id text NOT NULL, delivery_id text NOT NULL);
CREATE TABLE {s}.launches (
  run_id text NOT NULL, slot text NOT NULL, PRIMARY KEY (run_id, slot));
CREATE TABLE {s}.outcomes (
  delivery_id text PRIMARY KEY, admission_key text NOT NULL, outcome text NOT NULL);
"""


@dataclass(frozen=True)
class Counts:
    runs: int
    launches: int
    outcomes: int
    admitted: int


class Tables:
    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.schema = f"bench_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(DDL.format(s=self.schema).encode())

    def counts(self) -> Counts:
        s = self.schema
        with psycopg.connect(self.dsn) as conn:
            row = conn.execute(
                f"SELECT (SELECT count(*) FROM {s}.runs), (SELECT count(*) FROM {s}.launches),"
                f" (SELECT count(*) FROM {s}.outcomes),"
                f" (SELECT count(*) FROM {s}.outcomes WHERE outcome = 'admitted')".encode()
            ).fetchone()
        assert row is not None
        return Counts(*row)

    def close(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE".encode())


def per_delivery(
    tables: Tables, deliveries: list[Delivery], slots: list[str], connections: int = 4
) -> float:
    """Seconds to admit every delivery, one transaction each, from ``connections`` threads."""
    s = tables.schema
    insert_run = (
        f"INSERT INTO {s}.runs VALUES (%s, %s, %s) ON CONFLICT DO NOTHING RETURNING run_id"
    ).encode()
    insert_launch = f"INSERT INTO {s}.launches VALUES (%s, %s)".encode()
    insert_outcome = f"INSERT INTO {s}.outcomes VALUES (%s, %s, %s)".encode()
    errors: list[BaseException] = []

    def worker(share: list[Delivery]) -> None:
        try:
            with psycopg.connect(tables.dsn) as conn:
                for d in share:
                    with conn.transaction():
                        run_id = f"run-{d.delivery_id}"
                        won = conn.execute(
                            insert_run, (d.admission_key, run_id, d.delivery_id)
                        ).fetchone()
                        if won is not None:
                            conn.cursor().executemany(insert_launch, [(run_id, x) for x in slots])
                        outcome = "admitted" if won is not None else "deduplicated"
                        conn.execute(insert_outcome, (d.delivery_id, d.admission_key, outcome))
        except BaseException as e:
            errors.append(e)

    threads = [
        threading.Thread(target=worker, args=(deliveries[i::connections],))
        for i in range(connections)
    ]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.monotonic() - started
    if errors:
        raise errors[0]
    return took


def batched(
    tables: Tables, deliveries: list[Delivery], slots: list[str], batch: int = 1000
) -> float:
    """Seconds to admit every delivery, ``batch`` per transaction, from one connection."""
    s = tables.schema
    insert_runs = (
        f"INSERT INTO {s}.runs SELECT * FROM unnest(%s::text[], %s::text[], %s::text[])"
        " ON CONFLICT DO NOTHING RETURNING admission_key, delivery_id"
    ).encode()
    insert_launches = (
        f"INSERT INTO {s}.launches SELECT r, x FROM unnest(%s::text[]) r, unnest(%s::text[]) x"
    ).encode()
    insert_outcomes = (
        f"INSERT INTO {s}.outcomes SELECT * FROM unnest(%s::text[], %s::text[], %s::text[])"
    ).encode()
    started = time.monotonic()
    with psycopg.connect(tables.dsn) as conn:
        for i in range(0, len(deliveries), batch):
            chunk = deliveries[i : i + batch]
            keys = [d.admission_key for d in chunk]
            ids = [d.delivery_id for d in chunk]
            with conn.transaction():
                won = conn.execute(insert_runs, (keys, [f"run-{x}" for x in ids], ids)).fetchall()
                winners = {delivery_id for _key, delivery_id in won}
                conn.execute(insert_launches, ([f"run-{x}" for x in winners], slots))
                outcomes = ["admitted" if x in winners else "deduplicated" for x in ids]
                conn.execute(insert_outcomes, (ids, keys, outcomes))
    return time.monotonic() - started
