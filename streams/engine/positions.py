"""Input positions recorded with the state: how far a partition's decisions reach.

Every transaction that advances an input partition also writes ``m/offsets`` into the store
of that partition number, so into its changelog, in the same transaction as the group's
offsets: the offset of each input topic's partition after the transaction. The state
restored from the changelog therefore says where its decisions end, whatever became of the
group's committed offsets since.

Kafka deletes a group's offsets once the group has been empty for
``offsets.retention.minutes`` (7 days by default), while the input topics keep their records
for 14; ``kafka-consumer-groups --delete`` or ``--reset-offsets --to-earliest`` does the same
at once. An instance that trusted the group alone then started at the oldest record and
decided every one again, a second outcome for each. :func:`resume_at` resumes at the recorded
position when the committed offset is missing or behind it; a committed offset ahead of it
(an operator skipping records on purpose) is kept.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from streams.engine.store import META_PREFIX

OFFSETS_KEY = META_PREFIX + "offsets"


def encode(offsets: Mapping[str, int]) -> bytes:
    """``m/offsets``' value: each input topic's next offset in this partition."""
    return json.dumps(dict(sorted(offsets.items())), separators=(",", ":")).encode()


def decode(data: bytes | None) -> dict[str, int]:
    """The positions ``data`` records; none for no value, or one that is not a map of topic
    names to offsets (such a value is never trusted)."""
    if data is None:
        return {}
    try:
        raw = json.loads(data)
    except ValueError:
        return {}
    if not isinstance(raw, dict):
        return {}
    return {t: o for t, o in raw.items() if isinstance(t, str) and type(o) is int and o >= 0}


def resume_at(committed: int | None, recorded: int | None) -> int | None:
    """Where a partition's consumption resumes: the ``committed`` offset, or the ``recorded``
    position when there is no committed offset or it is behind; ``None`` when neither is
    known (the oldest record)."""
    if recorded is None or (committed is not None and committed >= recorded):
        return committed
    return recorded
