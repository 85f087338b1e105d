"""The counts as Prometheus text exposition (format 0.0.4), for ``GET /metrics``.

Every key of ``sluicegate stats`` becomes ``sluicegate_<key>_total`` (a counter) or, for
what can go down again (open holds, unresolved attempts), ``sluicegate_<key>`` (a gauge);
counts by reason carry a ``reason`` label. The projector's stored offsets are exported as
``sluicegate_projection_offset{topic,partition}`` so lag can be computed against Kafka's, and
each table's disk as ``sluicegate_projection_table_bytes{table}``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from streams.exposition import escape
from streams.kafka.headers import KINDS

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


def render(
    stats: Mapping[str, Any],
    offsets: Sequence[Mapping[str, Any]],
    *,
    parked: int,
    gap_offsets: int = 0,
    dead_letters: Mapping[str, int] | None = None,
    table_bytes: Mapping[str, int] | None = None,
) -> str:
    """The exposition text for ``stats`` (as from ``queries.get_stats``) and ``offsets``;
    ``parked`` messages, ``gap_offsets`` (offsets that left retention unprojected) and
    ``dead_letters`` (records the stream apps could not decide, by kind: every kind is
    listed, 0 when there are none, so an alert on one has a series from the start; a kind
    no engine writes counts as ``other``) and ``table_bytes`` (each table's disk, so the read
    model's growth, and what ``projections prune`` frees, can be watched)."""
    lines: list[str] = []
    for key, value in stats.items():
        gauge = key in GAUGES
        name = f"sluicegate_{key}" if gauge else f"sluicegate_{key}_total"
        lines.append(f"# HELP {name} {_HELP.get(key, key)}")
        lines.append(f"# TYPE {name} {'gauge' if gauge else 'counter'}")
        if isinstance(value, Mapping):
            for reason, count in sorted(value.items()):
                lines.append(f'{name}{{reason="{escape(str(reason))}"}} {int(count)}')
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
        "(table dead_letters), by kind: undecodable or unrecordable records, input offsets "
        'that left retention unread, partitions moved back to their start; kind="" for '
        "those written before kinds were."
    )
    lines.append("# TYPE sluicegate_dead_letters_total counter")
    letters = dict.fromkeys(KINDS, 0)
    for kind, count in (dead_letters or {}).items():
        # A kind no engine writes (another producer's header) must not grow the series.
        shown = kind if kind in letters or kind == "" else "other"
        letters[shown] = letters.get(shown, 0) + count
    for kind, count in sorted(letters.items()):
        lines.append(f'sluicegate_dead_letters_total{{kind="{escape(kind)}"}} {count}')
    lines.append(
        "# HELP sluicegate_projection_table_bytes Disk each table of the read model takes, "
        "its indexes included (space a prune frees is reused by later rows; VACUUM FULL "
        "returns it)."
    )
    lines.append("# TYPE sluicegate_projection_table_bytes gauge")
    for table, size in sorted((table_bytes or {}).items()):
        lines.append(f'sluicegate_projection_table_bytes{{table="{escape(table)}"}} {int(size)}')
    lines.append(
        "# HELP sluicegate_projection_offset Next offset the projector will read, per partition."
    )
    lines.append("# TYPE sluicegate_projection_offset gauge")
    for row in offsets:
        lines.append(
            f'sluicegate_projection_offset{{topic="{escape(str(row["topic"]))}",'
            f'partition="{int(row["partition"])}"}} {int(row["next_offset"])}'
        )
    return "\n".join(lines) + "\n"
