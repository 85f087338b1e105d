"""The bounds admission enforces, in one place.

They exist so that nothing a sender or an operator does can make admission write a record
Kafka refuses (the broker's default ``message.max.bytes`` is 1 MiB; an admission state is one
changelog record) or schedule a timer beyond the engine's 13-digit keys (year 2286):

* a delivery's payload, as canonical JSON, is at most :data:`MAX_PAYLOAD_BYTES` (else
  ``payload_too_large``, at the front doors and in the processor);
* an identity, scope, sequence or ``source`` value is at most :data:`MAX_FIELD_CHARS`
  characters once canonical, and a delivery or rerun-request id at most :data:`MAX_ID_CHARS`
  (else ``invalid_field`` / ``invalid_request``); a rerun reason at most
  :data:`MAX_RERUN_REASON_CHARS`;
* an occurrence has at most :data:`MAX_RERUNS` authorized reruns (then ``rerun_limit``);
  reruns share the occurrence's payload in the state instead of copying it;
* a workflow has at most :data:`MAX_SLOTS` slots and :data:`MAX_FIELDS` fields per list, and
  its durations are bounded (retention and window at most 366 days, branch timeout at most
  7 days, clock uncertainty at most 1 minute);
* source times lie in 2000-01-01 .. 2200-01-01 (:mod:`streams.core.durations`);
* a branch result, as JSON, is at most :data:`MAX_RESULT_BYTES` (the branch-worker SDK
  reports a larger one failed instead of sending it: ``consumers/branch_tasks.py``).

Together these keep the largest possible admission state under :data:`MAX_STATE_BYTES`
(``tests/unit/test_core_admission_bounds.py`` builds that state and measures it).
"""

from __future__ import annotations

from streams.core.durations import MS_PER_DAY, MS_PER_MINUTE

MAX_PAYLOAD_BYTES = 65_536
"""Largest payload admitted, in bytes of its canonical JSON (the webhook's default body limit)."""
MAX_FIELD_CHARS = 256
"""Longest canonical value of an identity, scope, sequence or ``source`` field."""
MAX_ID_CHARS = 128
"""Longest delivery id or rerun request id."""
MAX_RERUN_REASON_CHARS = 1_000
"""Longest reason of an authorized rerun."""
MAX_RERUNS = 20
"""Most authorized reruns of one occurrence (the admitted run not counted)."""
MAX_SLOTS = 16
"""Most branch slots of a workflow."""
MAX_FIELDS = 16
"""Most fields in each of ``identity.derived``, ``content.immutable`` and ``scope.fields``."""

MAX_RETENTION_MS = 366 * MS_PER_DAY
MAX_WINDOW_MS = 366 * MS_PER_DAY
MAX_BRANCH_TIMEOUT_MS = 7 * MS_PER_DAY
MAX_CLOCK_UNCERTAINTY_MS = MS_PER_MINUTE
DEFAULT_CLOCK_UNCERTAINTY_MS = 250
"""``[workflow.validity] clock_uncertainty`` when omitted."""

MAX_RESULT_BYTES = 512 * 1024
"""Largest branch result a worker reports, in bytes of its JSON: the report, and the
``BranchCompleted`` that carries it on, stay well under Kafka's 1 MiB record."""

MAX_STATE_BYTES = 512 * 1024
"""Upper bound of one encoded admission state plus its changelog key, given the limits above."""
