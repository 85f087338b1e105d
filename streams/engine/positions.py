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

An offset means something only in the topic it was read in. A topic deleted and created
again keeps its name, starts its offsets over and gets a new topic id; Kafka deletes the
group's offsets of the deleted topic, but the recorded position stays in the changelog. Grown
past that position before the instance looked, the new topic would be read on from it, and
its records below it never decided. So every store also records ``m/topic-ids``, the id of
each input topic its positions were read in (written with the first transaction of an
assignment whose ids differ), and :func:`read_in` judges a recorded position against the ids
the topics have now: one read in another topic is not resumed at.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from streams.engine.store import META_PREFIX

OFFSETS_KEY = META_PREFIX + "offsets"
TOPIC_IDS_KEY = META_PREFIX + "topic-ids"


def encode(offsets: Mapping[str, int]) -> bytes:
    """``m/offsets``' value: each input topic's next offset in this partition."""
    return json.dumps(dict(sorted(offsets.items())), separators=(",", ":")).encode()


def decode(data: bytes | None) -> dict[str, int]:
    """The positions ``data`` records; none for no value, or one that is not a map of topic
    names to offsets (such a value is never trusted)."""
    raw = _map(data)
    return {t: o for t, o in raw.items() if isinstance(t, str) and type(o) is int and o >= 0}


def encode_ids(ids: Mapping[str, str]) -> bytes:
    """``m/topic-ids``' value: the id of each input topic the positions were read in."""
    return json.dumps(dict(sorted(ids.items())), separators=(",", ":")).encode()


def decode_ids(data: bytes | None) -> dict[str, str]:
    """The topic ids ``data`` records; none for no value (a state written before they were
    recorded), or one that is not a map of names to ids."""
    raw = _map(data)
    return {t: i for t, i in raw.items() if isinstance(t, str) and isinstance(i, str) and i}


def read_in(recorded_id: str | None, current_id: str | None) -> bool:
    """Whether a position recorded with ``recorded_id`` was read in the topic that now has
    ``current_id``. Without a recorded id (a state written before ids were recorded) or a
    current one, it is taken to be: the behaviour before ids were recorded."""
    return recorded_id is None or current_id is None or recorded_id == current_id


def _map(data: bytes | None) -> dict[object, object]:
    if data is None:
        return {}
    try:
        raw = json.loads(data)
    except ValueError:
        return {}
    return raw if isinstance(raw, dict) else {}


def resume_at(committed: int | None, recorded: int | None) -> int | None:
    """Where a partition's consumption resumes: the ``committed`` offset, or the ``recorded``
    position when there is no committed offset or it is behind; ``None`` when neither is
    known (the oldest record)."""
    if recorded is None or (committed is not None and committed >= recorded):
        return committed
    return recorded
