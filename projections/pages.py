"""Pages of a list whose length senders set: an occurrence's deliveries, a run's timeline,
the holds and the dead letters.

A sender retrying in a loop delivers one occurrence as often as it likes, and every copy is a
row of the read model and a record of the run's timeline. Reads that listed them all grew
with them: 1,000,000 copies of one occurrence made one ``GET /v1/occurrences/{key}`` answer
309 MB after 11 s, the ingest process serving it 670 MiB larger, and its webhook silent for
5.3 s; that run's timeline did not finish within the read timeout at all. Such lists are read
a page at a time (``from``, ``limit``) and counted in full.
"""

from __future__ import annotations

from streams.text import parse_whole

PAGE_MAX = 1000
"""The most records one read of the HTTP API or a command may ask for."""
DELIVERIES_PAGE = 100
"""An occurrence's deliveries listed by one read unless it asks for another number."""
TIMELINE_PAGE = 1000
"""A run's timeline records listed by one read unless it asks for fewer."""
HOLDS_PAGE = 100
"""Holds listed by one read unless it asks for another number: each is an order whose
outcome nobody knows, and an outage of a venue can hold one per run it was sending."""
_FROM_MAX = 10**15

FROM_ACCEPTS = "a position: 0 (the first) or more, in ASCII digits"
LIMIT_ACCEPTS = f"a number of records from 1 to {PAGE_MAX}, in ASCII digits"


def parse_from(text: str) -> int | None:
    """A page's ``from`` given as text (:data:`FROM_ACCEPTS`), or ``None``."""
    return parse_whole(text, _FROM_MAX)


def parse_limit(text: str) -> int | None:
    """A page's ``limit`` given as text (:data:`LIMIT_ACCEPTS`), or ``None``."""
    value = parse_whole(text, PAGE_MAX)
    return value if value else None


def page(start: int, limit: int, listed: int, total: int) -> dict[str, int | None]:
    """``{"from", "limit", "next"}`` of a page of ``listed`` records from position ``start``
    of ``total``: ``next`` is the ``from`` of the following page, ``None`` after the last."""
    after = start + listed
    more = listed == limit and after < total
    return {"from": start, "limit": limit, "next": after if listed and more else None}
