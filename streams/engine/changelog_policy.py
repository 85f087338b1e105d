"""Whether a changelog topic keeps every state its instance may need again.

A state store is only as complete as its changelog. Compaction keeps the last record of
every key, so a compacted changelog restores every state; ``delete`` in ``cleanup.policy``
with a finite ``retention.ms`` or ``retention.bytes`` lets the broker drop whole segments,
and a store restored from what is left has forgotten the states in them (an admission
record: its occurrence would be admitted again; a journal entry: its order sent again).
``topics ensure`` creates changelogs compacted but never changes an existing topic, so one
created beforehand (a broker's ``auto.create.topics.enable``) or altered by hand is found
only by looking: every assignment looks (``Restorer.check_changelog``). Pure: the reading
of the configuration is the restorer's.
"""

from __future__ import annotations

from collections.abc import Mapping

KAFKA_DEFAULTS = {"cleanup.policy": "delete", "retention.ms": "604800000", "retention.bytes": "-1"}
"""What a topic has that does not set these itself (Kafka's broker defaults)."""

LIMITS = ("retention.ms", "retention.bytes")


def deletes_records(config: Mapping[str, str]) -> str | None:
    """Why a topic with ``config`` may lose records to deletion (its policy and finite
    limits, as ``cleanup.policy=..., retention.ms=...``), or ``None`` if it keeps them."""
    policy = config.get("cleanup.policy", KAFKA_DEFAULTS["cleanup.policy"])
    if "delete" not in (part.strip() for part in policy.split(",")):
        return None
    finite = [
        f"{limit}={value}"
        for limit in LIMITS
        if (value := config.get(limit, KAFKA_DEFAULTS[limit]).strip()) != "-1"
    ]
    return ", ".join([f"cleanup.policy={policy}", *finite]) if finite else None


def refusal(topic: str, why: str, bootstrap: str) -> str:
    """The message of the instance that stops because ``topic`` deletes records (``why``,
    from :func:`deletes_records`): what is at stake and the command that fixes it."""
    return (
        f"{topic} lets the broker delete records ({why}): a state restored from it may "
        "have forgotten what was decided (an occurrence would be admitted again, an "
        "order sent again), so this instance decides nothing. Make it compacted only: "
        f"kafka-configs.sh --bootstrap-server {bootstrap} --alter --entity-type topics "
        f"--entity-name {topic} --add-config cleanup.policy=compact; then start it "
        "again. Records the broker deleted already are not in any state restored since"
    )
