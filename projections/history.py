"""What the live read model holds that the topics no longer do.

The topics keep 14 to 30 days (``schemas.topics``); the read model keeps every record it
projected. A rebuild projects only what the topics hold, so on a deployment older than that
it would swap in a shorter history and drop the rest: runs, deliveries, the action journal.
:func:`projections.rebuild.rebuild` therefore counts those records twice and refuses to
swap in while any would go, unless told to drop them:

* before loading (:func:`below_start`), the live records below each partition's first
  offset: retention has taken them. Cheap (an index range per partition), so a long load is
  not wasted;
* after loading, just before the swap (:func:`absent_from`), the live records at offsets
  the rebuild covered that the rebuilt schema lacks. Exact: it also catches retention that
  moved during the load and records compaction removed from the middle of a topic.

A record is a row of ``event_log``, ``parked`` or ``dead_letters``, identified by its
source offset in a topic with the id the live schema recorded (``topic_ids.py``). A topic
deleted since (and perhaps created again: Kafka's data reset, a second checkout) holds none
of the records projected from it, whatever its offsets now say, so all of them count: the
rebuild that :class:`~projections.errors.TopicRecreated` asks for drops them only when
told to.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from projections import topic_ids
from projections.db import tables_in
from projections.errors import HistoryNotInTopics
from projections.sources import Sources, source_topics
from projections.store import Offsets
from streams.settings import Settings

SHOWN = 10
"""Partitions a message names before it says how many more there are."""


@dataclass(frozen=True)
class Missing:
    """Records of one source partition that the live schema holds and a rebuild would not."""

    topic: str
    """Short name (without the deployment's prefix)."""
    partition: int
    records: int
    first: int
    last: int
    """The lowest and highest of their offsets."""
    deleted: bool = False
    """Whether the topic they were projected from was deleted since (all of them count)."""

    def describe(self, prefix: str) -> str:
        what = "record" if self.records == 1 else "records"
        since = ", its topic deleted since" if self.deleted else ""
        return (
            f"{prefix}{self.topic}[{self.partition}]: {self.records:,} {what} "
            f"(offsets {self.first} to {self.last}{since})"
        )


RECORD_TABLES = ("event_log", "parked", "dead_letters")
"""The tables with one row per projected record (``dead_letters`` since migration 008)."""


def _tables(conn: psycopg.Connection[Any], schema: str) -> list[str]:
    """Those of :data:`RECORD_TABLES` that ``schema`` has (a live schema may predate one)."""
    present = tables_in(conn, schema, RECORD_TABLES)
    return [t for t in RECORD_TABLES if t in present]


def _records(conn: psycopg.Connection[Any], schema: str) -> sql.Composable:
    return sql.SQL(" UNION ALL ").join(
        sql.SQL("SELECT src_topic, src_partition, src_offset FROM {}").format(
            sql.Identifier(schema, t)
        )
        for t in _tables(conn, schema)
    )


def _bounds(offsets: Offsets) -> tuple[list[str], list[int], list[int]]:
    ordered = sorted(offsets.items())
    return [t for (t, _), _ in ordered], [p for (_, p), _ in ordered], [o for _, o in ordered]


def _missing(
    conn: psycopg.Connection[Any], query: sql.Composed, params: Any, *, deleted: bool = False
) -> list[Missing]:
    rows = conn.execute(query, params).fetchall()
    return [Missing(str(t), int(p), int(n), int(lo), int(hi), deleted) for t, p, n, lo, hi in rows]


def same_topics(recorded: Mapping[str, str], current: Mapping[str, str]) -> set[str]:
    """Topics whose current id is the recorded one, or that recorded none (a schema from
    before ids were kept): their offsets name the same records."""
    return {topic for topic, ident in current.items() if recorded.get(topic, ident) == ident}


def deleted_topics(recorded: Mapping[str, str], current: Mapping[str, str]) -> set[str]:
    """Topics ``recorded`` whose id is not current: deleted since, perhaps created again."""
    return {topic for topic, ident in recorded.items() if current.get(topic) != ident}


def every_record(conn: psycopg.Connection[Any], live: str, topics: set[str]) -> list[Missing]:
    """All the records of ``live`` projected from ``topics``."""
    if not topics:
        return []
    query = sql.SQL(
        "SELECT src_topic, src_partition, count(*), min(src_offset), max(src_offset) "
        "FROM ({records}) r WHERE src_topic = ANY(%s) GROUP BY 1, 2 ORDER BY 1, 2"
    ).format(records=_records(conn, live))
    return _missing(conn, query, (sorted(topics),), deleted=True)


def _below(
    conn: psycopg.Connection[Any], live: str, bounds: Offsets, lacking_in: str | None = None
) -> list[Missing]:
    """Records of ``live`` below their partition's bound, those ``lacking_in`` lacks if given."""
    if not bounds:
        return []
    lacking: sql.Composable = sql.SQL("")
    if lacking_in is not None:
        lacking = sql.SQL("WHERE {} ").format(
            sql.SQL(" AND ").join(
                sql.SQL(
                    "NOT EXISTS (SELECT 1 FROM {} f WHERE f.src_topic = r.src_topic "
                    "AND f.src_partition = r.src_partition AND f.src_offset = r.src_offset)"
                ).format(sql.Identifier(lacking_in, t))
                for t in _tables(conn, lacking_in)
            )
        )
    query = sql.SQL(
        "SELECT r.src_topic, r.src_partition, count(*), min(r.src_offset), max(r.src_offset) "
        "FROM ({records}) r JOIN unnest(%s::text[], %s::int[], %s::bigint[]) "
        "AS b(topic, part, bound) ON r.src_topic = b.topic "
        "AND r.src_partition = b.part AND r.src_offset < b.bound {lacking}"
        "GROUP BY 1, 2 ORDER BY 1, 2"
    ).format(records=_records(conn, live), lacking=lacking)
    return _missing(conn, query, _bounds(bounds))


def below_start(
    conn: psycopg.Connection[Any], live: str, starts: Offsets, topics: set[str]
) -> list[Missing]:
    """Records of ``live`` below their partition's first offset in ``starts`` (of ``topics``)."""
    return _below(conn, live, {tp: o for tp, o in starts.items() if o > 0 and tp[0] in topics})


def absent_from(
    conn: psycopg.Connection[Any], live: str, fresh: str, goal: Offsets, topics: set[str]
) -> list[Missing]:
    """Records of ``live`` at offsets below ``goal`` (of ``topics``) that ``fresh`` lacks."""
    covered = {tp: o for tp, o in goal.items() if o > 0 and tp[0] in topics}
    return _below(conn, live, covered, lacking_in=fresh)


def _listed(missing: Sequence[Missing], prefix: str) -> str:
    parts = [m.describe(prefix) for m in missing[:SHOWN]]
    if len(missing) > SHOWN:
        parts.append(f"and {len(missing) - SHOWN} more partitions")
    return "; ".join(parts)


def _count(missing: Sequence[Missing]) -> str:
    total = sum(m.records for m in missing)
    return f"{total:,} record" if total == 1 else f"{total:,} records"


def refusal(missing: Sequence[Missing], live: str, prefix: str) -> str:
    """The message a rebuild refuses with: what would go, and the operator's two ways on."""
    return (
        f"the live read model in schema {live} holds {_count(missing)} the topics no longer "
        "hold (retention or compaction removed them after they were projected, or their "
        f"topic was deleted since): "
        f"{_listed(missing, prefix)}. A rebuild projects only what the topics hold: it would "
        "drop them and every row built from them (runs, deliveries, the action journal). "
        "Nothing was changed. Keep the read model (the projector resumes it; `sluicegate "
        "projections check` says whether it can), or replace it with what the topics hold: "
        f"`sluicegate projections rebuild --drop-history` (first `pg_dump --schema {live}` "
        "if those rows are still needed)"
    )


def dropped_line(missing: Sequence[Missing], prefix: str) -> str:
    """What a rebuild told to drop history dropped."""
    return f"dropped {_count(missing)} the topics no longer hold: {_listed(missing, prefix)}"


def topic_starts(
    settings: Settings, conn: psycopg.Connection[Any], live: str
) -> tuple[Offsets, set[str], set[str]]:
    """The first offset every source partition holds now, the topics whose ids are those
    ``live`` recorded (their offsets name the records it projected) and the topics it
    recorded that were deleted since (none of their records is held any more)."""
    sources = Sources(settings, live, source_topics())
    try:
        starts = sources.start_offsets()
        ids = sources.topic_ids({topic for topic, _ in starts})
    finally:
        sources.close()
    recorded = topic_ids.recorded(conn, live)
    return starts, same_topics(recorded, ids), deleted_topics(recorded, ids)


def gone_from_topics(settings: Settings, conn: psycopg.Connection[Any], live: str) -> list[Missing]:
    """The live records the topics no longer hold, as far as their first offsets and ids
    tell: the look before loading."""
    starts, same, deleted = topic_starts(settings, conn, live)
    return sorted(
        below_start(conn, live, starts, same) + every_record(conn, live, deleted),
        key=lambda m: (m.topic, m.partition),
    )


def lacking(
    conn: psycopg.Connection[Any],
    live: str,
    fresh: str,
    goal: Offsets,
    *,
    topic_prefix: str,
    drop_history: bool,
) -> list[Missing]:
    """The live records the loaded ``fresh`` schema lacks: the exact look before swapping.
    :class:`HistoryNotInTopics` if there are any and not ``drop_history``."""
    recorded, current = topic_ids.recorded(conn, live), topic_ids.recorded(conn, fresh)
    missing = sorted(
        absent_from(conn, live, fresh, goal, same_topics(recorded, current))
        + every_record(conn, live, deleted_topics(recorded, current)),
        key=lambda m: (m.topic, m.partition),
    )
    if missing and not drop_history:
        raise HistoryNotInTopics(refusal(missing, live, topic_prefix))
    return missing
