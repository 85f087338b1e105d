"""The execution gateway as a stream app: the journal core on the exactly-once engine.

Keyed by run id. Input ``actions``: the gate's ``ActionDispatched`` and the operator commands
``RecoverRun`` and ``ResolveHold``. State: one :class:`~streams.core.journal.RunJournal` per
run, changelogged to ``gateway-changelog``. Events: every journal record to ``journal``.
Effects (:mod:`streams.engine.effects`): the core's ``effects_of`` the committed records,
performed by :class:`~consumers.gateway.shell.Shell`, answered with ``VenueAnswered``,
``LookupAnswered`` and ``ExposureObserved`` for the same run.

On every (re)assignment each restored run that :func:`~streams.core.journal.needs_recovery`
says has work left gets a ``RecoverRun``; the partition's ownership makes this instance the
run's one recovery owner. With ``journal_restored`` (``sluicegate gateway --journal-restored``)
the journal is one restored from an older point: every restored run without a recovery fence
gets a ``RecoverRun(journal_origin="backup")``, and every dispatch older than this start is
accepted as ``backup`` too, so that nothing is sent before the venue was asked. Keep the flag
on every start until every run has such a recovery (the gateway logs how many still lack one).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from consumers.gateway.dispatch import accept_dispatch
from consumers.gateway.settings import GatewaySettings
from consumers.gateway.shell import Shell
from schemas.codec import decode, encode
from schemas.commands import RecoverRun, ResolveHold
from schemas.errors import SchemaError
from schemas.events import ActionDispatched, DispatchRefused
from schemas.topics import ACTIONS, GATEWAY_CHANGELOG, JOURNAL
from streams.core import journal
from streams.core.journal import (
    CheckTimers,
    Command,
    EffectRequest,
    JournalEvent,
    Owner,
    RunJournal,
    needs_recovery,
)
from streams.core.journal.model import LIVE_JOURNAL
from streams.core.journal.state_codec import decode_state, encode_state
from streams.engine.app import InputError, Route, evolve_each
from streams.engine.failpoints import Failpoints
from streams.settings import Settings

log = logging.getLogger("sluicegate.gateway")

BACKUP = "backup"


class GatewayApp:
    """Adapter from Kafka records to journal commands, plus the effect shell."""

    name = "gateway"

    def __init__(
        self,
        settings: Settings,
        gateway: GatewaySettings,
        *,
        instance_id: str,
        shell: Shell,
        journal_restored: bool = False,
        started_at_ms: int = 0,
    ) -> None:
        self.input_topics: Sequence[str] = (settings.topic(ACTIONS),)
        self.changelog_topic = settings.topic(GATEWAY_CHANGELOG)
        self._journal = settings.topic(JOURNAL)
        self.gateway = gateway
        self.instance_id = instance_id
        self.shell = shell
        self.effect_threads = gateway.threads
        self.journal_restored = journal_restored
        self.started_at_ms = started_at_ms
        self.owner = Owner(instance_id, 0)
        self.unfenced = 0

    # -- records ---------------------------------------------------------------------------

    def decode_input(self, data: bytes) -> object:
        try:
            return decode(data)
        except SchemaError as e:
            raise InputError(str(e)) from e

    def encode_event(self, event: JournalEvent) -> bytes:
        return encode(event)

    def prepare(self, records: Sequence[object], now_ms: int) -> None:
        return None

    def to_command(self, record: object) -> Command | None:
        if isinstance(record, ActionDispatched):
            restored = self.journal_restored and record.dispatched_at_ms < self.started_at_ms
            return accept_dispatch(
                record,
                self.gateway.policy,
                self.gateway.approval_validity_ms,
                BACKUP if restored else LIVE_JOURNAL,
            )
        if isinstance(record, RecoverRun | ResolveHold):
            return record
        return None  # answers come from this instance's own effects, never from the topic

    def key_of(self, record: object) -> str | None:
        # Dispatches and operator commands are keyed by the run whose journal they touch.
        key = getattr(record, "run_id", None)
        return key if isinstance(key, str) else None

    def timer_command(self) -> Command:
        return CheckTimers(self.gateway.retention_ms)

    def decide(self, state: RunJournal | None, command: Command, now_ms: int) -> list[JournalEvent]:
        events = journal.decide(state, command, now_ms, self.owner)
        if state is None and events and isinstance(events[0], DispatchRefused):
            refused = events[0]
            log.warning(
                "dispatch of %s refused (%s): read %d ms after its send horizon, and this "
                "gateway keeps no journal of the run; nothing is journalled or sent",
                refused.action_id,
                refused.reason,
                refused.refused_at_ms - refused.send_horizon_ms,
                extra={
                    "fields": {
                        "run_id": refused.run_id,
                        "action_id": refused.action_id,
                        "reason": refused.reason,
                    }
                },
            )
        return events

    def evolve(self, state: RunJournal | None, event: JournalEvent) -> RunJournal | None:
        return journal.evolve(state, event)

    def evolve_all(
        self, state: RunJournal | None, events: Sequence[JournalEvent]
    ) -> RunJournal | None:
        return evolve_each(journal.evolve, state, events)

    def next_due_ms(self, state: RunJournal) -> int | None:
        return journal.next_due_ms(state, self.gateway.retention_ms)

    def route(self, event: JournalEvent) -> Route | None:
        return Route(self._journal, event.run_id)

    def encode_state(self, state: RunJournal) -> bytes:
        return encode_state(state)

    def decode_state(self, data: bytes) -> RunJournal:
        return decode_state(data)

    def undecidable(self, record: object, reason: str, now_ms: int) -> Sequence[JournalEvent]:
        return []

    # -- effects ---------------------------------------------------------------------------

    def effects_of(self, events: Sequence[JournalEvent]) -> list[EffectRequest]:
        return journal.effects_of(events)

    def perform(self, effect: EffectRequest) -> Command | None:
        return self.shell.perform(effect)

    def expired(self, effect: EffectRequest, now_ms: int) -> Command | None:
        return self.shell.expired(effect, now_ms)

    def on_assigned(self, generation: int) -> None:
        self.owner = Owner(self.instance_id, generation)
        self.unfenced = 0

    def on_restored(self, key: str, state: RunJournal, now_ms: int) -> Command | None:
        if state.primary is None:
            return None
        unfenced = self.journal_restored and state.absence_not_before_ms is None
        if unfenced:
            self.unfenced += 1
        elif not needs_recovery(state):
            return None
        return RecoverRun(
            request_id=f"{key}.restored.{self.instance_id}.{self.owner.generation}",
            run_id=key,
            requested_by=self.instance_id,
            reason="journal restored from an older point" if unfenced else "partition assigned",
            requested_at_ms=now_ms,
            journal_origin=BACKUP if unfenced else LIVE_JOURNAL,
        )


def make_app(
    settings: Settings,
    gateway: GatewaySettings,
    *,
    instance_id: str,
    clock: Callable[[], int],
    failpoints: Failpoints,
    journal_restored: bool = False,
) -> GatewayApp:
    """The gateway app with its shell (one venue client per effect thread)."""
    shell = Shell(gateway, clock, failpoints)
    return GatewayApp(
        settings,
        gateway,
        instance_id=instance_id,
        shell=shell,
        journal_restored=journal_restored,
        started_at_ms=clock(),
    )
