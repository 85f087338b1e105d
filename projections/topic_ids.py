"""Which Kafka topics a read model was projected from: the id of each source topic.

Kafka gives a topic a new id (a UUID) whenever it is created, so a topic deleted and created
again under the same name has a new one, and so has every topic of a cluster whose data was
reset while PostgreSQL kept the read model. The offsets a schema stores belong to the topics
it read. Resumed on new topics, they are refused while they lie beyond a partition's end, but
once the new topics have grown past them nothing in the offsets tells, and the projector
would skip each partition's first records for good.

So the first assignment of a topic records its id in the schema (table ``topic_ids``), and
every assignment after it compares, as does a running projector's look at its topics (every
10 s): topics deleted and created again between two looks keep their partitions, and the
assigned consumer reads them on from its old positions without an error. A topic whose id
differs raises :class:`~projections.errors.TopicRecreated`, whose message names the remedy
(``sluicegate projections rebuild --drop-history`` projects the topics as they are now, ids
included, and drops what was projected from the old ones: :mod:`projections.history`).

A schema from before this table records the ids it finds at its next assignment: topics
recreated before that are caught only by offsets beyond a partition's end, as they were.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psycopg
from psycopg import sql

from projections.db import tables_in
from projections.errors import TopicRecreated


def claim(conn: psycopg.Connection[Any], schema: str, ids: Mapping[str, str]) -> None:
    """Record ``ids`` (short topic name -> Kafka topic id) in ``schema`` where none is yet;
    :class:`TopicRecreated` if a topic's recorded id differs (nothing is recorded then)."""
    if not ids:
        return
    table = sql.Identifier(schema, "topic_ids")
    with conn.transaction():
        rows = conn.execute(
            sql.SQL("SELECT topic, topic_id FROM {} WHERE topic = ANY(%s)").format(table),
            (list(ids),),
        ).fetchall()
        recorded = {str(topic): str(topic_id) for topic, topic_id in rows}
        changed = sorted(t for t, i in ids.items() if recorded.get(t, i) != i)
        if changed:
            first = changed[0]
            raise TopicRecreated(
                f"the read model in schema {schema} was projected from other topics of the "
                f"same names: {', '.join(changed)} ({first} had id {recorded[first]}, now "
                f"{ids[first]}). They were deleted and created again, or Kafka's data was "
                "reset, so the stored offsets mean nothing there. Run `sluicegate projections "
                "rebuild --drop-history` to project the topics as they are now; it drops what "
                f"was projected from the old ones (`pg_dump --schema {schema}` first to keep "
                "it)."
            )
        new = {t: i for t, i in ids.items() if t not in recorded}
        if new:
            conn.execute(
                sql.SQL(
                    "INSERT INTO {} (topic, topic_id) SELECT * FROM unnest(%s::text[], "
                    "%s::text[]) ON CONFLICT (topic) DO NOTHING"
                ).format(table),
                (list(new), list(new.values())),
            )


def recorded(conn: psycopg.Connection[Any], schema: str) -> dict[str, str]:
    """The id ``schema`` recorded per short topic name; none in a schema still at the
    migrations of a build from before this table (a rebuild's look at an older read model)."""
    if not tables_in(conn, schema, ["topic_ids"]):
        return {}
    rows = conn.execute(
        sql.SQL("SELECT topic, topic_id FROM {}").format(sql.Identifier(schema, "topic_ids"))
    ).fetchall()
    return {str(t): str(i) for t, i in rows}
