"""Whether an existing topic keeps what the catalogue declares it keeps. Pure.

``topics ensure`` creates topics as ``schemas.topics`` declares them but never changes one
that exists, so a topic created beforehand (a broker's ``auto.create.topics.enable`` gives
``cleanup.policy=delete`` and seven days) or altered by hand keeps whatever it was given.
That is found only by reading the configuration (``streams.kafka.topics.read_configs``):

- A compacted topic holds state (a changelog, the ``workflows`` table). Compaction keeps
  the newest record of every key for ever; ``delete`` in ``cleanup.policy`` with a finite
  ``retention.ms`` or ``retention.bytes`` lets the broker drop whole segments, and what is
  read back from the rest has forgotten states (:func:`deletes_records`). Nothing may run on
  it: every component's start (``ensure_topics``) and every assignment of a stream app
  (``Restorer.check_changelog``) refuses, with :func:`refusal`.
- A log topic keeping less than declared (:func:`shortfalls`) is an operator's choice with
  a cost (records deleted before they were read, a rebuild that sees less), which
  ``topics ensure`` reports.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from schemas.topics import Role, TopicSpec

KAFKA_DEFAULTS = {"cleanup.policy": "delete", "retention.ms": "604800000", "retention.bytes": "-1"}
"""What a topic has that does not set these itself (Kafka's broker defaults)."""

LIMITS = ("retention.ms", "retention.bytes")

_AT_STAKE = {
    Role.CHANGELOG: (
        "a state restored from it may have forgotten what was decided (an occurrence would "
        "be admitted again, an order sent again), so this instance decides nothing",
        "Records the broker deleted already are not in any state restored since",
    ),
    Role.TABLE: (
        "every process reads it whole at its start, and one started after the broker "
        "deleted a destination's only revision no longer knows the destination and refuses "
        "its deliveries, so nothing starts on it",
        "A revision the broker deleted already must be applied again (sluicegate workflows apply)",
    ),
}


def _setting(config: Mapping[str, str], name: str) -> str:
    return config.get(name, KAFKA_DEFAULTS[name]).strip()


def _policies(config: Mapping[str, str]) -> set[str]:
    return {part.strip() for part in _setting(config, "cleanup.policy").split(",")}


def deletes_records(config: Mapping[str, str]) -> str | None:
    """Why a topic with ``config`` may lose records to deletion (its policy and finite
    limits, as ``cleanup.policy=..., retention.ms=...``), or ``None`` if it keeps them."""
    if "delete" not in _policies(config):
        return None
    finite = [f"{limit}={v}" for limit in LIMITS if (v := _setting(config, limit)) != "-1"]
    policy = config.get("cleanup.policy", KAFKA_DEFAULTS["cleanup.policy"])
    return ", ".join([f"cleanup.policy={policy}", *finite]) if finite else None


def refusal(topic: str, why: str, bootstrap: str, role: Role = Role.CHANGELOG) -> str:
    """The message of a process that stops because ``topic`` (a changelog or a table: its
    ``role``) deletes records (``why``, from :func:`deletes_records`): what is at stake and
    the command that fixes it."""
    stake, after = _AT_STAKE.get(role, _AT_STAKE[Role.CHANGELOG])
    return (
        f"{topic} lets the broker delete records ({why}): {stake}. Make it compacted only: "
        f"kafka-configs.sh --bootstrap-server {bootstrap} --alter --entity-type topics "
        f"--entity-name {topic} --add-config cleanup.policy=compact; then start it "
        f"again. {after}"
    )


@dataclass(frozen=True)
class Shortfall:
    """One way a log topic keeps less than declared: ``setting`` (``cleanup.policy``,
    ``retention.ms``, ``retention.bytes``) has ``actual`` where the catalogue declares
    ``declared`` (``-1``: no limit)."""

    setting: str
    actual: str
    declared: str


def shortfalls(spec: TopicSpec, config: Mapping[str, str]) -> list[Shortfall]:
    """How a log topic (not compacted by declaration) with ``config`` keeps less than
    ``spec`` declares: compaction (only the newest record of a key survives), a shorter
    ``retention.ms``, a finite ``retention.bytes``. Longer retention is no shortfall; a
    compacted spec has none (:func:`deletes_records` judges it)."""
    if spec.compacted:
        return []
    found = []
    if "compact" in _policies(config):
        found.append(Shortfall("cleanup.policy", _setting(config, "cleanup.policy"), "delete"))
    if "delete" in _policies(config):
        kept = int(_setting(config, "retention.ms"))
        if 0 <= kept < spec.retention_ms:
            found.append(Shortfall("retention.ms", str(kept), str(spec.retention_ms)))
        size = _setting(config, "retention.bytes")
        if size != "-1":
            found.append(Shortfall("retention.bytes", size, "-1"))
    return found
