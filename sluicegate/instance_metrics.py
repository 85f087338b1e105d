"""An engine instance's counters and state as Prometheus text (format 0.0.4).

``GET /metrics`` on the instance's probes listener (``--health``, ``sluicegate/health.py``)
answers it, for ``processor``, ``gate`` and ``gateway``. Every sample carries ``app`` (the
stream app: ``admission``, ``gate``, ``gateway``) and ``instance_id`` (its
``--instance-id``; not ``instance``, which Prometheus sets to the scraped address).

- Counters (``_total``) count committed transactions only, since the process started (a
  restarted process starts from 0, which Prometheus' ``rate`` and ``increase`` expect). They
  are read while the instance runs, without a lock: a scrape taken during a commit may count
  a transaction's records before its events.
- The gateway's effects (``sluicegate_engine_effects_*_total``): venue requests asked for,
  made, skipped as late, dropped on a move, failed.
- Gauges: the phase (one series per phase, 1 for the current one), whether ready and
  healthy (as ``/readyz`` and ``/healthz`` answer), how long ago its loop came round, the
  partitions it holds, and each held input partition's lag in offsets (``lag.py``: sampled
  once a second by the loop, from its consumer's cache; none outside ``running``).

Alert on ``sluicegate_engine_input_lag_offsets`` growing, on ``sluicegate_engine_ready``
staying 0, and on ``sluicegate_engine_starts_over_total`` or ``..._dead_letters_total``
increasing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streams.engine.status import Phase, Snapshot, healthy, ready

if TYPE_CHECKING:  # the counters' types only: the CLI builds probes without the engine
    from streams.engine.batch import ProcessorStats
    from streams.engine.effects import EffectStats

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_COUNTERS: tuple[tuple[str, str, str], ...] = (
    ("records", "records", "Input records decided in committed transactions."),
    ("events", "events", "Events written in committed transactions."),
    ("transactions", "batches", "Transactions committed."),
    ("aborts", "aborts", "Transactions aborted (their batches were decided again)."),
    (
        "producers_renewed",
        "producers_renewed",
        "Producers replaced after the broker aborted a transaction that outlived its timeout.",
    ),
    (
        "starts_over",
        "restarts",
        "Times the instance started over in place (a transaction's outcome unknown, a "
        "restore timed out, its consumer fenced).",
    ),
    ("timers_fired", "timers_fired", "Timers fired in committed transactions."),
    ("answers", "answers", "Effect answers (venue receipts or unknowns) decided."),
    ("dead_letters", "dead_letters", "Records written to the dead-letter topic."),
    ("forwarded", "forwarded", "Inputs forwarded to the partition their key belongs to."),
    (
        "expired_offsets",
        "expired",
        "Input offsets that left their topic before they were read (never decided).",
    ),
    ("restored_records", "restored_records", "Changelog records restored into the stores."),
)


_EFFECT_COUNTERS: tuple[tuple[str, str], ...] = (
    ("submitted", "Effects (venue requests) a committed transaction asked for."),
    ("performed", "Effects performed (the request was made; its answer is decided next)."),
    ("late", "Effects not performed: past their deadline when their turn came."),
    ("dropped", "Effects or answers dropped: their partition moved to another instance."),
    ("failed", "Effects whose code raised (logged with the traceback)."),
    (
        "restored_commands",
        "Commands a restored journal asked for at assignment (recovery looks).",
    ),
)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def render(
    app: str,
    instance_id: str,
    stats: ProcessorStats,
    snapshot: Snapshot,
    *,
    now: float,
    stalled_after_s: float,
    effects: EffectStats | None = None,
) -> str:
    """The exposition text of one instance (``now`` on the status' monotonic clock);
    ``effects``: the effect counters of an instance that has effects (the gateway)."""
    base = f'app="{_escape(app)}",instance_id="{_escape(instance_id)}"'
    lines: list[str] = []

    def family(name: str, kind: str, text: str) -> None:
        lines.append(f"# HELP {name} {text}")
        lines.append(f"# TYPE {name} {kind}")

    for metric, attribute, text in _COUNTERS:
        name = f"sluicegate_engine_{metric}_total"
        family(name, "counter", text)
        lines.append(f"{name}{{{base}}} {int(getattr(stats, attribute))}")
    name = "sluicegate_engine_restore_seconds_total"
    family(name, "counter", "Seconds spent restoring stores from their changelogs.")
    lines.append(f"{name}{{{base}}} {stats.restore_seconds:.3f}")

    for metric, text in _EFFECT_COUNTERS if effects is not None else ():
        name = f"sluicegate_engine_effects_{metric}_total"
        family(name, "counter", text)
        lines.append(f"{name}{{{base}}} {int(getattr(effects, metric))}")

    family("sluicegate_engine_phase", "gauge", "1 for the phase the instance is in, else 0.")
    for phase in Phase:
        current = int(phase is snapshot.phase)
        lines.append(f'sluicegate_engine_phase{{{base},phase="{phase.value}"}} {current}')
    gauges = (
        ("ready", "1 while the instance processes what arrives (as /readyz).", ready(snapshot)),
        (
            "healthy",
            "1 while the instance is worth keeping (as /healthz).",
            healthy(snapshot, now, stalled_after_s),
        ),
        ("phase_seconds", "Seconds since the phase began.", round(now - snapshot.since, 3)),
        (
            "loop_seconds_ago",
            "Seconds since the instance's loop last came round.",
            round(now - snapshot.loop_at, 3),
        ),
        ("assigned_partitions", "Input partitions the instance holds.", len(snapshot.assigned)),
    )
    for metric, text, value in gauges:
        name = f"sluicegate_engine_{metric}"
        family(name, "gauge", text)
        lines.append(f"{name}{{{base}}} {value if isinstance(value, float) else int(value)}")
    name = "sluicegate_engine_input_lag_offsets"
    family(name, "gauge", "Offsets between the consumer's position and the partition's end.")
    for each in snapshot.lag:
        labels = f'{base},topic="{_escape(each.topic)}",partition="{each.partition}"'
        lines.append(f"{name}{{{labels}}} {each.offsets}")
    return "\n".join(lines) + "\n"
