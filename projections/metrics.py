"""The counts as Prometheus text exposition (format 0.0.4), for ``GET /metrics``.

Every key of ``sluicegate stats`` becomes ``sluicegate_<key>_total`` (a counter) or, for
what can go down again (open holds, unresolved attempts), ``sluicegate_<key>`` (a gauge);
counts by reason carry a ``reason`` label. The projector's stored offsets are exported as
``sluicegate_projection_offset{topic,partition}`` so lag can be computed against Kafka's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_HELP: dict[str, str] = {
    "deliveries": "Deliveries received (AdmitDelivery commands).",
    "runs_admitted": "Runs admitted, reruns included.",
    "duplicates": "Deliveries answered with an existing run, by reason.",
    "conflicts": "Deliveries with the identity of an admitted occurrence but other content.",
    "rejected": "Deliveries rejected without a run, by reason.",
    "branch_launches": "Branch slots launched.",
    "branch_relaunches": "Branch slots relaunched after their timeout.",
    "expired_at_dequeue": "Branches skipped because the deadline had passed when taken.",
    "expired_before_send": "Actions not sent because the deadline passed before dispatch.",
    "superseded": "Candidates replaced by a newer accepted signal of their scope.",
    "actions_dispatched": "Actions dispatched to the gateway.",
    "dispatches_refused": "Dispatches of runs without a journal read an hour or more past "
    "their send horizon: refused, nothing sent.",
    "unresolved_attempt": "Attempts whose outcome is not established (held ones included).",
    "holds": "Actions on hold awaiting an owner's decision.",
}
GAUGES = frozenset({"unresolved_attempt", "holds"})


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def render(
    stats: Mapping[str, Any],
    offsets: Sequence[Mapping[str, Any]],
    parked: int,
    gap_offsets: int = 0,
    dead_letters: int = 0,
) -> str:
    """The exposition text for ``stats`` (as from ``queries.get_stats``) and ``offsets``;
    ``parked`` messages, ``gap_offsets`` (offsets that left retention unprojected) and
    ``dead_letters`` (records the stream apps could not decide)."""
    lines: list[str] = []
    for key, value in stats.items():
        gauge = key in GAUGES
        name = f"sluicegate_{key}" if gauge else f"sluicegate_{key}_total"
        lines.append(f"# HELP {name} {_HELP.get(key, key)}")
        lines.append(f"# TYPE {name} {'gauge' if gauge else 'counter'}")
        if isinstance(value, Mapping):
            for reason, count in sorted(value.items()):
                lines.append(f'{name}{{reason="{_escape(str(reason))}"}} {int(count)}')
        else:
            lines.append(f"{name} {int(value)}")
    lines.append("# HELP sluicegate_projection_parked_total Messages the projector could not read.")
    lines.append("# TYPE sluicegate_projection_parked_total counter")
    lines.append(f"sluicegate_projection_parked_total {parked}")
    lines.append(
        "# HELP sluicegate_projection_retention_gap_offsets_total Offsets that left their "
        "topic's retention before the projector read them (table retention_gaps)."
    )
    lines.append("# TYPE sluicegate_projection_retention_gap_offsets_total counter")
    lines.append(f"sluicegate_projection_retention_gap_offsets_total {gap_offsets}")
    lines.append(
        "# HELP sluicegate_dead_letters_total Records the stream apps could not decide "
        "(table dead_letters): undecodable or unrecordable inputs, input offsets that left "
        "retention unread."
    )
    lines.append("# TYPE sluicegate_dead_letters_total counter")
    lines.append(f"sluicegate_dead_letters_total {dead_letters}")
    lines.append(
        "# HELP sluicegate_projection_offset Next offset the projector will read, per partition."
    )
    lines.append("# TYPE sluicegate_projection_offset gauge")
    for row in offsets:
        lines.append(
            f'sluicegate_projection_offset{{topic="{_escape(str(row["topic"]))}",'
            f'partition="{int(row["partition"])}"}} {int(row["next_offset"])}'
        )
    return "\n".join(lines) + "\n"
