"""The admission aggregate: one state per admission key, decided purely.

``decide(state, command, now) -> events`` and ``evolve(state, event) -> state`` are the whole
contract (with :func:`next_due_ms` for timers). The engine keeps one :class:`OccurrenceState`
per admission key (deliveries, branch reports and rerun requests are keyed by it), calls
:func:`decide`, writes the events and the evolved state in one Kafka transaction, and calls
:func:`decide` with :class:`CheckTimers` whenever :func:`next_due_ms` of a state has passed.
Nothing here reads a clock: ``now`` (epoch ms UTC) is passed in, and every event records the
``now`` it was decided at.

Guarantees
----------
* **One run per occurrence.** The first acceptable delivery of an admission key produces
  ``RunAdmitted`` (rerun 0, deterministic run id) and one ``BranchLaunched`` per slot, in the
  same output. Every later delivery of that key produces exactly one outcome event:
  ``DeliveryDeduplicated`` (answered with the *original* run, reason ``in_flight``,
  ``completed``, ``skipped`` or ``failed``) or ``OccurrenceConflict`` (same identity, other
  immutable content or source time; the original run is untouched).
* **Frozen context.** A run keeps the workflow revision, slots, payload, source time and
  deadline it was admitted with; a redeploy between retries never creates a new run.
* **Explicit horizon.** A first delivery whose source time is older than ``now`` minus the
  smallest retention in effect since its source time
  (:func:`streams.core.retention.smallest_retention`) is
  ``DeliveryRejected(beyond_horizon)``. The record is evicted no earlier than
  ``source time + retention + EVICTION_MARGIN_MS`` (the retention it was admitted under) and
  only once every branch slot of every run has finished, so a copy arriving after eviction
  is already beyond the horizon, whatever retention was applied in between.
* **No self-extended validity.** A first delivery whose source time is later than
  ``now + clock_uncertainty`` is ``DeliveryRejected(source_time_in_future)``: a sender
  cannot push its own deadline out.
* **Bounded state.** Payloads over :data:`~streams.core.limits.MAX_PAYLOAD_BYTES` are
  ``payload_too_large``, reruns beyond :data:`~streams.core.limits.MAX_RERUNS` are
  ``rerun_limit``, and together with the other limits of :mod:`streams.core.limits` no
  state can grow past :data:`~streams.core.limits.MAX_STATE_BYTES`.
* **Idempotent branch reports.** A report for a finished slot, an unknown run or slot, or an
  attempt that was never launched produces no events; a repeated message never counts twice.
  A finishing report from an older attempt still finishes the slot (the work was done).
* **Missing-slot recovery.** A slot with no result by its timeout is relaunched under the same
  run (next attempt) until the run's ``branch_attempts`` launches were made (the workflow's,
  frozen at admission), then failed by the processor. Finished slots are never relaunched.
* **Loud corruption.** :func:`evolve` raises :class:`~streams.core.errors.IllegalTransition` or
  :class:`~streams.core.errors.InconsistentHistory` for an event :func:`decide` could not
  have produced from that state.

Modules: the state (:mod:`.state`), the commands and events (:mod:`.commands`), deliveries
(:mod:`.admit`), reruns (:mod:`.rerun`), branch results and timers (:mod:`.branches`), the
events' construction (:mod:`.builders`), :mod:`.evolve` and :mod:`.decide`.

Rejection reasons (``DeliveryRejected.reason``, :mod:`streams.core.reasons`):
``unknown_subscription``, ``payload_too_large``, ``missing_identity_fields``,
``invalid_field``, ``identity_mismatch`` (the delivery was keyed under another identity than
the processor derives: republish it), ``source_time_in_future`` and ``beyond_horizon``, judged
in that order. Rerun rejection reasons: ``unknown_run``, ``duplicate_request``,
``missing_reason``, ``invalid_request``, ``rerun_limit``.
"""

from streams.core.admission.branches import PROCESSOR_WORKER
from streams.core.admission.builders import reject, reject_rerun
from streams.core.admission.commands import (
    AdmissionEvent,
    Admit,
    BranchReport,
    CheckTimers,
    Command,
    RecordBranchReport,
    Rerun,
    WorkerReport,
    accepted,
    claim_of,
)
from streams.core.admission.decide import decide, next_due_ms
from streams.core.admission.evolve import evolve, evolve_all
from streams.core.admission.state import EVICTION_MARGIN_MS, OccurrenceState, RunState, SlotState
from streams.core.workflow import DEFAULT_BRANCH_ATTEMPTS

__all__ = [
    "DEFAULT_BRANCH_ATTEMPTS",
    "EVICTION_MARGIN_MS",
    "PROCESSOR_WORKER",
    "AdmissionEvent",
    "Admit",
    "BranchReport",
    "CheckTimers",
    "Command",
    "OccurrenceState",
    "RecordBranchReport",
    "Rerun",
    "RunState",
    "SlotState",
    "WorkerReport",
    "accepted",
    "claim_of",
    "decide",
    "evolve",
    "evolve_all",
    "next_due_ms",
    "reject",
    "reject_rerun",
]
