"""Errors of the projections package.

Every error raised on purpose derives from :class:`ProjectionError`; the CLI prints its
message to stderr and exits non-zero, so messages say what to do next.
"""

from __future__ import annotations


class ProjectionError(Exception):
    """Root of every error :mod:`projections` raises on purpose."""


class ProjectionUnavailable(ProjectionError):
    """The read model cannot be read: PostgreSQL is unreachable or the schema is missing."""


class NotInProjection(ProjectionError):
    """A run, occurrence or delivery is not in the projection (yet)."""

    def __init__(self, what: str, ident: str, hint: str) -> None:
        self.what = what
        self.ident = ident
        super().__init__(f"no {what} {ident!r} in the projection; {hint}")


class MigrationError(ProjectionError):
    """The schema's migration history does not match the migrations in this build."""


class OffsetsMoved(ProjectionError):
    """The stored offsets are not where this projector left them.

    Another writer (a rebuild that swapped its schema in, or a second projector) moved them;
    the projector re-reads them and seeks there. Never escapes the projector loop.
    """


class TopicRecreated(ProjectionError):
    """A stored offset lies beyond the end of its partition: the topic was recreated."""


class HistoryNotInTopics(ProjectionError):
    """A rebuild would drop records the live read model holds and the topics no longer do
    (:mod:`projections.history`); nothing was changed. ``--drop-history`` lets it."""


class HeldRowsRefused(ProjectionError):
    """PostgreSQL refused rows a bulk load held back across batches (``held_rows``).

    Which message they came from is no longer known, so they cannot be parked one by one;
    the load is redone batch by batch (what :func:`projections.rebuild.rebuild` does).
    """
