"""Read queries over the projection, shared by the CLI and the HTTP API.

Every function takes an open connection and the schema, returns plain JSON-ready values
(``dict``/``list``/``str``/``int``/``None``) and passes every user-supplied value as a query
parameter; identifiers go through :class:`psycopg.sql.Identifier`.

Modules: :mod:`.connection` (the reader and shared helpers), :mod:`.runs`,
:mod:`.occurrences`, :mod:`.counts`, :mod:`.scopes`, :mod:`.journal` (the gateway's tables:
gauges, holds, recoveries); every query but the journal's is importable from here. Lists
whose length senders set are read a page at a time (:mod:`projections.pages`).
"""

from projections.queries.connection import (
    PROJECTOR_HINT,
    Json,
    ensure_readable,
    found,
    iso,
    limit_reads,
    reader,
    reading,
)
from projections.queries.counts import (
    BY_REASON,
    STATS_KEYS,
    get_dead_letter_counts,
    get_gap_offsets,
    get_offsets,
    get_parked_count,
    get_stats,
    get_table_bytes,
)
from projections.queries.dead_letters import list_dead_letters
from projections.queries.occurrences import get_occurrence
from projections.queries.runs import get_run, get_timeline, rerun_result, run_admission_key
from projections.queries.scopes import get_run_candidates, get_scope

__all__ = [
    "BY_REASON",
    "PROJECTOR_HINT",
    "STATS_KEYS",
    "Json",
    "ensure_readable",
    "found",
    "get_dead_letter_counts",
    "get_gap_offsets",
    "get_occurrence",
    "get_offsets",
    "get_parked_count",
    "get_run",
    "get_run_candidates",
    "get_scope",
    "get_stats",
    "get_table_bytes",
    "get_timeline",
    "iso",
    "limit_reads",
    "list_dead_letters",
    "reader",
    "reading",
    "rerun_result",
    "run_admission_key",
]
