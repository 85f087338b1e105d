"""An engine instance's, the projector's and a branch worker's counters and state as
Prometheus text (format 0.0.4).

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

The projector's page (:func:`render_projector`, labels ``app="projector"`` and ``share``)
has its counts, readiness, health and ``sluicegate_projector_lag_offsets``: from each
assigned partition's offset stored in PostgreSQL to the partition's end. A caught-up
projector shows 0 (it stores the end itself, markers included). A branch worker's
(:func:`render_worker`, labels ``app="worker"`` and ``worker``) has the tasks it took and
the reports it wrote, by kind.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from streams.engine.status import Phase, Snapshot, healthy, ready
from streams.exposition import Exposition


class ProjectorCounts(Protocol):
    messages: int
    parked: int
    batches: int
    reconnects: int
    reseeks: int


if TYPE_CHECKING:  # the counters' types only: the CLI builds probes without the engine
    from streams.engine.batch import ProcessorStats
    from streams.engine.effects import EffectStats
    from streams.engine.lag import PartitionLag

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
    page = Exposition(app=app, instance_id=instance_id)
    for metric, attribute, text in _COUNTERS:
        page.counter(f"sluicegate_engine_{metric}_total", text, getattr(stats, attribute))
    page.counter(
        "sluicegate_engine_restore_seconds_total",
        "Seconds spent restoring stores from their changelogs.",
        round(stats.restore_seconds, 3),
    )
    for metric, text in _EFFECT_COUNTERS if effects is not None else ():
        page.counter(f"sluicegate_engine_effects_{metric}_total", text, getattr(effects, metric))

    page.family("sluicegate_engine_phase", "gauge", "1 for the phase the instance is in, else 0.")
    for phase in Phase:
        page.sample("sluicegate_engine_phase", phase is snapshot.phase, phase=phase.value)
    page.gauge(
        "sluicegate_engine_ready",
        "1 while the instance processes what arrives (as /readyz).",
        ready(snapshot),
    )
    page.gauge(
        "sluicegate_engine_healthy",
        "1 while the instance is worth keeping (as /healthz).",
        healthy(snapshot, now, stalled_after_s),
    )
    page.gauge(
        "sluicegate_engine_phase_seconds",
        "Seconds since the phase began.",
        round(now - snapshot.since, 3),
    )
    page.gauge(
        "sluicegate_engine_loop_seconds_ago",
        "Seconds since the instance's loop last came round.",
        round(now - snapshot.loop_at, 3),
    )
    page.gauge(
        "sluicegate_engine_assigned_partitions",
        "Input partitions the instance holds.",
        len(snapshot.assigned),
    )
    lag_family(page, "sluicegate_engine_input_lag_offsets", snapshot.lag)
    return page.text()


def lag_family(page: Exposition, name: str, lag: Sequence[PartitionLag]) -> None:
    """``name`` as a family of one gauge per partition of ``lag``."""
    page.family(name, "gauge", "Offsets between the committed offset and the partition's end.")
    for each in lag:
        page.sample(name, each.offsets, topic=each.topic, partition=str(each.partition))


_PROJECTOR_COUNTERS: tuple[tuple[str, str], ...] = (
    ("messages", "Messages projected (committed to PostgreSQL) since the process started."),
    ("parked", "Messages it could not read, kept in the table parked."),
    ("batches", "Batches committed."),
    ("reconnects", "Times it connected to PostgreSQL again."),
    ("reseeks", "Times it sought back to its stored offsets after a batch failed."),
)


def render_projector(
    share: str,
    stats: ProjectorCounts,
    lag: Sequence[PartitionLag],
    *,
    ready: bool,
    healthy: bool,
    loop_seconds_ago: float,
) -> str:
    """The exposition text of one projector (``share``: ``all``, or ``K/N``)."""
    page = Exposition(app="projector", share=share)
    for metric, text in _PROJECTOR_COUNTERS:
        page.counter(f"sluicegate_projector_{metric}_total", text, getattr(stats, metric))
    page.gauge("sluicegate_projector_ready", "1 while connected to PostgreSQL.", ready)
    page.gauge("sluicegate_projector_healthy", "1 while worth keeping (as /healthz).", healthy)
    page.gauge(
        "sluicegate_projector_loop_seconds_ago",
        "Seconds since its loop last came round.",
        round(loop_seconds_ago, 3),
    )
    lag_family(page, "sluicegate_projector_lag_offsets", lag)
    return page.text()


def render_worker(
    name: str,
    handled: int,
    reports: Mapping[str, int],
    *,
    healthy: bool,
    loop_seconds_ago: float,
) -> str:
    """The exposition text of one branch worker (``name``: its :attr:`BranchWorker.name`)."""
    page = Exposition(app="worker", worker=name)
    page.counter(
        "sluicegate_worker_tasks_handled_total",
        "Tasks of a served slot taken (each is started, or skipped at take).",
        handled,
    )
    reports_total = "sluicegate_worker_reports_total"
    page.family(reports_total, "counter", "Reports written to branch-results, by kind.")
    for kind, count in sorted(reports.items()):
        page.sample(reports_total, count, report=kind)
    page.gauge("sluicegate_worker_healthy", "1 while worth keeping (as /healthz).", healthy)
    page.gauge(
        "sluicegate_worker_loop_seconds_ago",
        "Seconds since its loop came round or a handler returned.",
        round(loop_seconds_ago, 3),
    )
    return page.text()
