"""Pure row mapping: one decoded record and where it came from -> the rows it produces.

:func:`project` is the whole mapping. Every record becomes an ``event_log`` row; a record
type with a handler in :data:`~projections.rows.HANDLERS` also feeds the specific tables.
Handlers live by area: :mod:`.admission`, :mod:`.branches`, :mod:`.gate`, :mod:`.journal`.
Adding an event type is one handler in its area's module (registered with
:func:`~projections.rows.handles`) plus, when it needs a table, one migration and one
:class:`~projections.model.TableSpec`.

Handlers are pure (no clock, no I/O) and total: they may be called more than once for the
same record, and the table policies make that harmless.
"""

from __future__ import annotations

from projections.handlers import admission, branches, gate, journal
from projections.model import RowOp
from projections.rows import HANDLERS, Source, event_log_row, park, record_time_ms

__all__ = ["AREAS", "HANDLERS", "Source", "park", "project", "record_time_ms"]

AREAS = (admission, branches, gate, journal)
"""The modules whose handlers are registered (imported here, so none is ever missing)."""


def project(source: Source, record: object) -> list[RowOp]:
    """All rows ``record`` produces: its event-log row, then its handler's rows."""
    ops: list[RowOp] = [("event_log", event_log_row(source, record))]
    handler = HANDLERS.get(type(record))
    if handler is not None:
        ops.extend(handler(source, record))
    return ops
