"""Run admission as a :class:`StreamApp`: the core in ``streams.core.admission`` on the engine.

Inputs (co-partitioned, keyed by admission key): ``deliveries`` (``AdmitDelivery``,
``AuthorizeRerun``) and ``branch-results`` (the workers' ``ReportBranch*`` claims; records
written there before 0.2.0 by the workers as ``Branch*`` events are read as the claims they
were). Outputs: ``tasks`` gets ``BranchLaunched``/``BranchRelaunched`` (the branch workers'
queue); ``candidates`` gets the gate's inputs (``CandidateProposed``, ``DispatchRequested``,
``DispatchWithdrawn``, keyed by scope key; :mod:`streams.core.admission.actions`); ``runs``
gets every other event, including each *accepted* claim once, as its ``Branch*`` fact, so
that downstream readers count a (run, slot) result once however often a worker repeated it.

A delivery whose admission can never be recorded (its run or state over Kafka's message size
limit) is answered ``DeliveryRejected(reason="cannot_be_recorded")`` and dead-lettered by the
engine, so that a sender waiting with ``?wait=`` gets an answer; a rerun request likewise gets
``RerunRejected(reason="cannot_be_recorded")``.
"""

from __future__ import annotations

import typing
from collections.abc import Sequence

from schemas.codec import decode, encode
from schemas.commands import (
    AdmitDelivery,
    AuthorizeRerun,
    ReportBranchCompleted,
    ReportBranchFailed,
    ReportBranchSkipped,
    ReportBranchStarted,
)
from schemas.errors import SchemaError
from schemas.events import (
    BranchCompleted,
    BranchFailed,
    BranchLaunched,
    BranchRelaunched,
    BranchSkipped,
    BranchStarted,
    CandidateProposed,
    DispatchRequested,
    DispatchWithdrawn,
    WorkflowRevised,
)
from schemas.topics import (
    ADMISSION_CHANGELOG,
    BRANCH_RESULTS,
    CANDIDATES,
    DELIVERIES,
    RUNS,
    TASKS,
    TopicSpec,
)
from streams.adapters.workflow_table import WorkflowTable
from streams.core import admission
from streams.core.admission import (
    Admit,
    CheckTimers,
    OccurrenceState,
    RecordBranchReport,
    Rerun,
    claim_of,
)
from streams.core.reasons import CANNOT_BE_RECORDED
from streams.core.state_codec import decode_state, encode_state
from streams.engine.app import InputError, Route
from streams.settings import Settings

_CLAIMS = (ReportBranchStarted, ReportBranchCompleted, ReportBranchFailed, ReportBranchSkipped)
_LEGACY_CLAIMS = (BranchStarted, BranchCompleted, BranchFailed, BranchSkipped)
_TASKS = (BranchLaunched, BranchRelaunched)
_GATE_INPUTS = (CandidateProposed, DispatchRequested, DispatchWithdrawn)
_DETAIL_CHARS = 500
_EVENT_TYPES: tuple[type, ...] = typing.get_args(admission.AdmissionEvent)


def topic_of(event: admission.AdmissionEvent) -> TopicSpec:
    """Where an admission event goes: launches to ``tasks``, the gate's inputs to
    ``candidates``, everything else to ``runs``."""
    return topic_of_type(type(event))


def topic_of_type(kind: type) -> TopicSpec:
    """:func:`topic_of` for every event of type ``kind``."""
    if issubclass(kind, _TASKS):
        return TASKS
    return CANDIDATES if issubclass(kind, _GATE_INPUTS) else RUNS


def branch_report(record: object) -> RecordBranchReport | None:
    """The command for a record read from ``branch-results``: a worker's claim, or a record a
    worker wrote there before 0.2.0 (a ``Branch*`` event) read as the claim it was."""
    if isinstance(record, _CLAIMS):
        return RecordBranchReport(record)
    if isinstance(record, _LEGACY_CLAIMS):
        return RecordBranchReport(claim_of(record))
    return None


class AdmissionApp:
    """Adapter from Kafka records to admission commands; holds the workflow table."""

    name = "admission"

    def __init__(self, settings: Settings, workflows: WorkflowTable) -> None:
        self.input_topics: Sequence[str] = (
            settings.topic(DELIVERIES),
            settings.topic(BRANCH_RESULTS),
        )
        self.changelog_topic = settings.topic(ADMISSION_CHANGELOG)
        # topic_of's answer per event type, computed once: hashing a TopicSpec (its enums'
        # Python __hash__ included) for every event produced was a measurable share of route().
        self._topics = {kind: settings.topic(topic_of_type(kind)) for kind in _EVENT_TYPES}
        self._workflows = workflows

    def decode_input(self, data: bytes) -> object:
        try:
            return decode(data)
        except SchemaError as e:
            raise InputError(str(e)) from e

    def encode_event(self, event: admission.AdmissionEvent) -> bytes:
        return encode(event)

    def prepare(self, records: Sequence[object], now_ms: int) -> None:
        # Revisions applied while we run are taken in before each batch is decided.
        self._workflows.refresh()
        # A workflow applied a moment before its first delivery may not be in the table yet:
        # catch up once per batch, before the transaction opens, rather than reject it.
        for record in records:
            if isinstance(record, AdmitDelivery | AuthorizeRerun):
                destination = self._destination(record)
                if destination is not None and self._workflows.get(*destination) is None:
                    self._workflows.catch_up()
                    return

    def _destination(self, record: AdmitDelivery | AuthorizeRerun) -> tuple[str, str] | None:
        if isinstance(record, AdmitDelivery):
            return record.subscription, record.environment
        subscription, _, rest = record.admission_key.partition("/")
        environment = rest.partition("/")[0]
        return (subscription, environment) if subscription and environment else None

    def _workflow(self, record: AdmitDelivery | AuthorizeRerun) -> WorkflowRevised | None:
        destination = self._destination(record)
        return None if destination is None else self._workflows.get(*destination)

    def to_command(self, record: object) -> admission.Command | None:
        if isinstance(record, AdmitDelivery):
            return Admit(record, self._workflow(record))
        if isinstance(record, AuthorizeRerun):
            return Rerun(record, self._workflow(record))
        return branch_report(record)

    def key_of(self, record: object) -> str | None:
        # Every input (deliveries, rerun requests, branch reports) names its admission key.
        key = getattr(record, "admission_key", None)
        return key if isinstance(key, str) else None

    def timer_command(self) -> admission.Command:
        return CheckTimers()

    def decide(
        self, state: OccurrenceState | None, command: admission.Command, now_ms: int
    ) -> Sequence[admission.AdmissionEvent]:
        return admission.decide(state, command, now_ms)

    def evolve(
        self, state: OccurrenceState | None, event: admission.AdmissionEvent
    ) -> OccurrenceState | None:
        return admission.evolve(state, event)

    def evolve_all(
        self, state: OccurrenceState | None, events: Sequence[admission.AdmissionEvent]
    ) -> OccurrenceState | None:
        return admission.evolve_all(state, events)

    def next_due_ms(self, state: OccurrenceState) -> int | None:
        return admission.next_due_ms(state)

    def route(self, event: admission.AdmissionEvent) -> Route | None:
        topic = self._topics[type(event)]  # the core decides these exact types only
        if isinstance(event, _GATE_INPUTS):
            return Route(topic, event.scope_key)
        return Route(topic, event.admission_key)

    def encode_state(self, state: OccurrenceState) -> bytes:
        return encode_state(state)

    def decode_state(self, data: bytes) -> OccurrenceState:
        return decode_state(data)

    def undecidable(
        self, record: object, reason: str, now_ms: int
    ) -> Sequence[admission.AdmissionEvent]:
        detail = f"the admission could not be recorded: {reason}"[:_DETAIL_CHARS]
        if isinstance(record, AdmitDelivery):
            return admission.reject(record, CANNOT_BE_RECORDED, detail, now_ms)
        if isinstance(record, AuthorizeRerun):
            return admission.reject_rerun(record, CANNOT_BE_RECORDED, now_ms)
        return []
