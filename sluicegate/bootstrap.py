"""The composition root: the one place that builds components and wires them together.

Each function takes the settings and returns a component ready to run (its topics ensured,
the tables it reads caught up), so the command modules only parse arguments, handle signals
and print. Nothing below ``sluicegate`` builds another package's component: the webhook
does not know the read API exists, the engine does not know admission; they meet here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from threading import Event
from typing import TYPE_CHECKING

from streams import logs
from streams.adapters.workflow_table import WorkflowTable
from streams.engine.processor import Processor
from streams.heartbeat import Heartbeat
from streams.kafka.topics import ensure_topics
from streams.settings import Settings

# Each builder imports its own component: a processor starts without the projector's
# PostgreSQL driver, the gateway app or the branch worker (about 0.2 s less per start).
if TYPE_CHECKING:
    from consumers.branch_worker import BranchWorker, Handler
    from consumers.gateway.settings import GatewaySettings
    from consumers.ingest.settings import IngestSettings
    from projections.projector import Projector
    from projections.share import Share
    from streams.core import gate
    from streams.core.admission import AdmissionEvent, Command, OccurrenceState
    from streams.core.journal import Command as JournalCommand
    from streams.core.journal import JournalEvent, RunJournal

    AdmissionProcessor = Processor[OccurrenceState, Command, AdmissionEvent]
    GatewayProcessor = Processor[RunJournal, JournalCommand, JournalEvent]
    GateProcessor = Processor[gate.ScopeState, gate.Command, gate.GateEvent]


@dataclass
class RunningAdmission:
    """An admission processor and the workflow table it reads (close it after the run)."""

    processor: AdmissionProcessor
    workflows: WorkflowTable


def admission_processor(
    settings: Settings, *, instance_id: str, batch_size: int, commit_interval_ms: int
) -> RunningAdmission:
    """Run admission on the exactly-once engine, over a caught-up workflow table."""
    from streams.apps.admission import AdmissionApp

    ensure_topics(settings)
    table = WorkflowTable(settings)
    table.catch_up()
    processor: AdmissionProcessor = Processor(
        settings,
        AdmissionApp(settings, table),
        instance_id=instance_id,
        batch_size=batch_size,
        commit_interval_ms=commit_interval_ms,
    )
    return RunningAdmission(processor, table)


def gateway_processor(
    settings: Settings,
    gateway: GatewaySettings,
    *,
    instance_id: str,
    commit_interval_ms: int,
    journal_restored: bool = False,
) -> GatewayProcessor:
    """The execution gateway on the exactly-once engine: the journal core, its venue shell
    (``gateway`` names the venue), the failpoints armed by ``SLUICEGATE_FAILPOINTS``, static
    group membership (a restarted instance takes its partitions back at once)."""
    from consumers.gateway.app import make_app
    from streams.clock import wall_clock_ms
    from streams.engine import failpoints

    ensure_topics(settings)
    app = make_app(
        settings,
        gateway,
        instance_id=instance_id,
        clock=wall_clock_ms,
        failpoints=failpoints.from_env(),
        journal_restored=journal_restored,
    )
    processor: GatewayProcessor = Processor(
        settings,
        app,
        instance_id=instance_id,
        commit_interval_ms=commit_interval_ms,
        static_membership=True,
    )
    return processor


def gate_processor(
    settings: Settings, *, instance_id: str, batch_size: int, commit_interval_ms: int
) -> GateProcessor:
    """Run the supersession gate on the exactly-once engine (its own group and ids)."""
    from streams.apps.gate import GateApp

    ensure_topics(settings)
    processor: GateProcessor = Processor(
        settings,
        GateApp(settings),
        instance_id=instance_id,
        batch_size=batch_size,
        commit_interval_ms=commit_interval_ms,
    )
    return processor


def branch_worker(
    settings: Settings,
    handler: Handler,
    *,
    slots: Sequence[str] | None,
    deadline_slots: Sequence[str] | None,
    clock_uncertainty_ms: int,
    name: str,
    group: str = "branch-workers",
) -> BranchWorker:
    """A branch worker of the SDK serving ``slots`` (all when ``None``) with ``handler``."""
    from consumers.branch_worker import BranchWorker

    ensure_topics(settings)
    return BranchWorker(
        settings,
        handler,
        slots=slots,
        deadline_slots=deadline_slots,
        clock_uncertainty_ms=clock_uncertainty_ms,
        name=name,
        group=group,
    )


def projector(
    settings: Settings, *, batch_size: int, stop: Event, share: Share | None = None
) -> Projector:
    """The projector of every projected topic (its ``share`` of their partitions) into the
    live read model."""
    from projections.projector import Projector

    ensure_topics(settings)
    return Projector(settings, batch_size=batch_size, stop=stop, share=share)


def serve_ingest(
    settings: Settings, limits: IngestSettings, heartbeat: Heartbeat | None = None
) -> None:
    """Serve the webhook and, on its own listener, the read API, until SIGTERM/SIGINT
    (beating ``heartbeat`` from its event loop meanwhile).

    The read API is mounted here, not by ingest: ingest serves whatever read application it
    is given (none when ``SLUICEGATE_READ_HTTP=off``).
    """
    # aiohttp is loaded only by the commands that serve HTTP (`sluicegate --help` stays light).
    from consumers.ingest.request_metrics import RequestMetrics
    from consumers.ingest.server import run_ingest
    from projections.http import create_read_app

    # Its log is JSON lines unless SLUICEGATE_LOG_FORMAT says text: librdkafka's lines too.
    setup = logs.configure("ingest", default=logs.JSON)
    settings = replace(settings, kafka_logger=setup.kafka_logger)
    counted = RequestMetrics()
    read_app = None
    if limits.read_http is not None:
        read_app = create_read_app(settings, token=limits.read_token, ingest_metrics=counted.render)
    ensure_topics(settings)
    run_ingest(settings, limits, read_app=read_app, heartbeat=heartbeat, metrics=counted)
