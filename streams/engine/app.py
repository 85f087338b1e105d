"""What the engine runs: a pure decide/evolve pair, plus how its records travel.

The engine knows nothing about admission (or any other job). An application gives it the
input topics (co-partitioned: one state per partition number), turns a decoded input record
into a core command, and says where each resulting event goes. Everything that decides is
the application's pure core; everything that moves bytes is the engine.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Generic, NamedTuple, Protocol, TypeVar


class InputError(Exception):
    """An input record the app cannot read; the engine moves it to the dead-letter topic."""


S = TypeVar("S")
C = TypeVar("C")
E = TypeVar("E")


class Route(NamedTuple):
    """Where an event is produced: a full topic name and a message key (a named tuple: one is
    built per event produced)."""

    topic: str
    key: str


class StreamApp(Protocol, Generic[S, C, E]):
    """An application the engine can run exactly once.

    Contract: ``decide`` and ``evolve`` are pure and deterministic given ``now``; the engine
    folds every event ``decide`` returns through ``evolve`` before the next command of the
    same key, produces it to ``route(event)`` (``None``: state only), and commits the events,
    the state change and the input offset in one Kafka transaction. A record whose decision
    can never be produced gets ``undecidable(record, reason, now)`` instead.
    """

    name: str
    input_topics: Sequence[str]
    changelog_topic: str

    def decode_input(self, data: bytes) -> object:
        """Decode an input record's value; raise ``InputError`` (to dead-letter it) if it is bad."""

    def encode_event(self, event: E) -> bytes: ...

    def prepare(self, records: Sequence[object], now_ms: int) -> None:
        """Called once per batch before the transaction opens (e.g. refresh lookup tables).

        May block (it runs outside the transaction); must not produce anything.
        """

    def to_command(self, record: object) -> C | None:
        """The core command for a decoded input record; ``None`` skips the record."""

    def key_of(self, record: object) -> str | None:
        """The key a decoded input record belongs under: that of the state it is decided
        against (``None``: the record does not say, its message key stands). The engine
        forwards a record consumed under another key, or on another partition than this
        key's, to where it belongs (``deciding.py``)."""

    def timer_command(self) -> C:
        """The command sent to a key whose timer is due."""

    def decide(self, state: S | None, command: C, now_ms: int) -> Sequence[E]: ...

    def evolve(self, state: S | None, event: E) -> S | None:
        """The state after ``event``; ``state`` itself (the same object) when the event does
        not change it, so the engine does not write an unchanged state to the changelog."""

    def evolve_all(self, state: S | None, events: Sequence[E]) -> S | None:
        """The state after ``events`` in order: what :meth:`evolve` returns applied to them one
        at a time (the same object when none changes it, the same error where one raises). The
        engine calls this once per decision; :func:`evolve_each` is the plain way to write it,
        an app whose decisions make several events may fold them faster."""

    def next_due_ms(self, state: S) -> int | None:
        """When this state next needs ``timer_command``; ``None`` for never."""

    def route(self, event: E) -> Route | None: ...

    def encode_state(self, state: S) -> bytes: ...

    def decode_state(self, data: bytes) -> S: ...

    def undecidable(self, record: object, reason: str, now_ms: int) -> Sequence[E]:
        """The outcome events for a decoded input record that can never be recorded.

        Called when deciding ``record`` produces something Kafka will never accept (for
        example an event or a state over ``message.max.bytes``, ``reason`` says which). The
        engine dead-letters the record with ``reason`` and its original bytes and produces
        these events (routed by :meth:`route`, not folded into any state) in its place, so
        that whoever waits for an answer gets one. Return ``[]`` for no answer.
        """


def evolve_each(
    evolve: Callable[[S | None, E], S | None], state: S | None, events: Sequence[E]
) -> S | None:
    """``state`` after applying ``evolve`` to each of ``events`` in order."""
    for event in events:
        state = evolve(state, event)
    return state
