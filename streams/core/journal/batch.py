"""The events of one decision, folded as they are made so that each step sees the last."""

from __future__ import annotations

from streams.core.journal.evolve import evolve
from streams.core.journal.model import JournalEvent, Owner, RunJournal


class Batch:
    """Collects one decision's events; ``journal`` is the state after all of them so far."""

    def __init__(self, state: RunJournal | None, now: int, owner: Owner) -> None:
        self.state = state
        self.now = now
        self.owner = owner
        self.events: list[JournalEvent] = []

    @property
    def journal(self) -> RunJournal:
        """The state so far (only used once the run has a record)."""
        assert self.state is not None
        return self.state

    def emit(self, event: JournalEvent) -> None:
        """Record ``event`` and fold it into the state (raises what ``evolve`` raises)."""
        self.state = evolve(self.state, event)
        self.events.append(event)
