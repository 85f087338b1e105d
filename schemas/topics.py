"""The topic catalogue: every topic Sluicegate reads or writes, declared once.

Each :class:`TopicSpec` says what the topic's records are keyed by, what role the topic plays,
which topics must share one partition count (a co-partitioned group: a record and the state
that decides it must land on the same partition number), how long Kafka keeps its records and,
for a changelog, whose state it holds. Components name topics only through the constants
below (``settings.topic(RUNS)`` is the full name under the configured prefix);
``streams.kafka.topics.ensure_topics`` creates them, the projector reads the ones whose role
is projected, and ``sluicegate replay`` accepts their names.

The names are part of the public surface (README, "Configuration"): add topics freely, never
rename one.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

DAY_MS = 86_400_000


class Role(StrEnum):
    """What a topic is for."""

    INPUT = "input"
    """Commands a stream app decides (deliveries, worker reports)."""
    OUTPUT = "output"
    """Events a stream app writes (runs, tasks)."""
    CHANGELOG = "changelog"
    """A stream app's state, compacted; written in the app's transactions, read on restore."""
    TABLE = "table"
    """A compacted table every process reads whole (the workflow revisions)."""
    DEAD_LETTER = "dead-letter"
    """Raw copies of records an app could not decide, with the reason in a header."""


class Key(StrEnum):
    """What a topic's message keys are."""

    ADMISSION_KEY = "admission key"
    """Destination + occurrence identity (``streams.core.identity``)."""
    SCOPE_KEY = "scope key"
    """A decision scope (environment + scope fields)."""
    RUN_ID = "run id"
    DESTINATION = "destination"
    """``subscription/environment``."""
    ORIGINAL_KEY = "original key"
    """The key of the record the message stands for."""


ADMISSION_GROUP = "admission"
"""The co-partitioned group of everything keyed by admission key."""
GATE_GROUP = "gate"
"""The co-partitioned group of everything keyed by scope key."""
GATEWAY_GROUP = "gateway"
"""The co-partitioned group of the gateway's topics (keyed by run id)."""


@dataclass(frozen=True)
class TopicSpec:
    """One topic. ``partitions=None``: the group's count (``SLUICEGATE_PARTITIONS`` at first).

    ``changelog_of`` names the stream app whose state a :attr:`Role.CHANGELOG` topic holds.
    """

    name: str
    key: Key
    role: Role
    partitions: int | None = None
    compacted: bool = False
    retention_ms: int = 7 * DAY_MS
    copartition_group: str | None = None
    changelog_of: str | None = None

    @property
    def projected(self) -> bool:
        """Whether the read model projects it: everything but state (dead letters into a
        table of their own, never decoded)."""
        return self.role is not Role.CHANGELOG

    def config(self) -> dict[str, str]:
        """The topic configuration it is created with."""
        if self.compacted:
            return {"cleanup.policy": "compact", "min.compaction.lag.ms": "0"}
        return {"cleanup.policy": "delete", "retention.ms": str(self.retention_ms)}


WORKFLOWS = TopicSpec("workflows", Key.DESTINATION, Role.TABLE, partitions=1, compacted=True)
"""``WorkflowRevised``: every destination's revisions (the newest one counts)."""
DELIVERIES = TopicSpec(
    "deliveries",
    Key.ADMISSION_KEY,
    Role.INPUT,
    retention_ms=14 * DAY_MS,
    copartition_group=ADMISSION_GROUP,
)
"""``AdmitDelivery`` from the front doors and ``AuthorizeRerun``: admission's commands."""
BRANCH_RESULTS = TopicSpec(
    "branch-results",
    Key.ADMISSION_KEY,
    Role.INPUT,
    retention_ms=14 * DAY_MS,
    copartition_group=ADMISSION_GROUP,
)
"""The branch workers' reports, decided by admission."""
ADMISSION_CHANGELOG = TopicSpec(
    "admission-changelog",
    Key.ADMISSION_KEY,
    Role.CHANGELOG,
    compacted=True,
    copartition_group=ADMISSION_GROUP,
    changelog_of="admission",
)
"""The admission app's state per admission key."""
RUNS = TopicSpec(
    "runs",
    Key.ADMISSION_KEY,
    Role.OUTPUT,
    retention_ms=30 * DAY_MS,
    copartition_group=ADMISSION_GROUP,
)
"""Admission's outcomes and facts: runs, deliveries' outcomes, accepted branch results."""
TASKS = TopicSpec(
    "tasks",
    Key.ADMISSION_KEY,
    Role.OUTPUT,
    retention_ms=14 * DAY_MS,
    copartition_group=ADMISSION_GROUP,
)
"""``BranchLaunched`` / ``BranchRelaunched``: the branch workers' queue."""
CANDIDATES = TopicSpec(
    "candidates",
    Key.SCOPE_KEY,
    Role.INPUT,
    retention_ms=14 * DAY_MS,
    copartition_group=GATE_GROUP,
)
"""``CandidateProposed``, ``DispatchRequested``, ``DispatchWithdrawn`` from admission: the
gate's commands, one decision scope per key."""
GATE_CHANGELOG = TopicSpec(
    "gate-changelog",
    Key.SCOPE_KEY,
    Role.CHANGELOG,
    compacted=True,
    copartition_group=GATE_GROUP,
    changelog_of="gate",
)
"""The gate app's state per decision scope."""
GATE_DECISIONS = TopicSpec(
    "gate-decisions",
    Key.SCOPE_KEY,
    Role.OUTPUT,
    retention_ms=30 * DAY_MS,
    copartition_group=GATE_GROUP,
)
"""``CandidateAccepted`` / ``CandidateSuperseded`` / ``CandidateExpired`` /
``CandidateRejected``: the gate's decisions."""
ACTIONS = TopicSpec(
    "actions",
    Key.RUN_ID,
    Role.OUTPUT,
    retention_ms=30 * DAY_MS,
    copartition_group=GATEWAY_GROUP,
)
"""``ActionDispatched`` (the gate's) and the operators' ``RecoverRun`` / ``ResolveHold``: the
execution gateway's input."""
DEAD_LETTERS = TopicSpec(
    "dead-letters", Key.ORIGINAL_KEY, Role.DEAD_LETTER, partitions=1, retention_ms=30 * DAY_MS
)
"""Records a stream app could not decide (headers ``sluicegate.reason``, ``sluicegate.origin``)."""
GATEWAY_CHANGELOG = TopicSpec(
    "gateway-changelog",
    Key.RUN_ID,
    Role.CHANGELOG,
    compacted=True,
    copartition_group=GATEWAY_GROUP,
    changelog_of="gateway",
)
"""The execution gateway's state per run: its action journal."""
JOURNAL = TopicSpec(
    "journal",
    Key.RUN_ID,
    Role.OUTPUT,
    retention_ms=30 * DAY_MS,
    copartition_group=GATEWAY_GROUP,
)
"""The action journal: intents, attempts, receipts, holds, checkpoints, recovery receipts."""

TOPICS: tuple[TopicSpec, ...] = (
    WORKFLOWS,
    DELIVERIES,
    BRANCH_RESULTS,
    ADMISSION_CHANGELOG,
    RUNS,
    TASKS,
    CANDIDATES,
    GATE_CHANGELOG,
    GATE_DECISIONS,
    ACTIONS,
    DEAD_LETTERS,
    GATEWAY_CHANGELOG,
    JOURNAL,
)
"""Every topic, in the order ``sluicegate topics ensure`` lists them."""


def named(name: str) -> TopicSpec | None:
    """The topic called ``name`` (the short name, without the prefix), or ``None``."""
    for spec in TOPICS:
        if spec.name == name:
            return spec
    return None


def projected() -> tuple[TopicSpec, ...]:
    """The topics the read model projects, in catalogue order."""
    return tuple(spec for spec in TOPICS if spec.projected)
