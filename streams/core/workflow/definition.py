"""One validated workflow definition, its destination key and its digest."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass

import orjson

from streams.core.limits import DEFAULT_CLOCK_UNCERTAINTY_MS

ENVIRONMENTS = ("paper", "live")

DEFAULT_BRANCH_TIMEOUT_MS = 30_000
DEFAULT_BRANCH_ATTEMPTS = 3
DEFAULT_RETENTION_MS = 7 * 24 * 3_600_000
MAX_BRANCH_ATTEMPTS = 100


@dataclass(frozen=True)
class WorkflowDefinition:
    """One validated ``[[workflow]]`` table. All durations are milliseconds.

    ``branch_attempts`` is the maximum number of launches per slot (relaunches + 1), frozen
    on each run. ``identity_case_sensitive_fields`` lists venue/instrument fields that are
    kept as given instead of case-folded (:mod:`streams.core.fields`). ``identity_envelope``
    is ``"cloudevents"`` for a destination that takes CloudEvents 1.0
    (:data:`streams.core.fields.CLOUDEVENTS`), else ``None``.

    ``[workflow.actions]``: ``action_propose_slot`` is the slot whose result may propose an
    action (``None``: the workflow proposes nothing), ``action_approve_slots`` the slots that
    must complete before it may be dispatched, ``action_exit_window_ms`` the deadline of
    non-entry actions from the source time (``None``: none at the gate).
    """

    subscription: str
    environment: str
    slots: tuple[str, ...]
    branch_timeout_ms: int
    branch_attempts: int
    retention_ms: int
    identity_event_id_field: str | None
    identity_derived_fields: tuple[str, ...]
    immutable_fields: tuple[str, ...]
    validity_source_time: str
    validity_window_ms: int
    scope_fields: tuple[str, ...]
    scope_sequence_field: str | None
    auth_token_env: str | None
    auth_hmac_secret_env: str | None
    clock_uncertainty_ms: int = DEFAULT_CLOCK_UNCERTAINTY_MS
    identity_case_sensitive_fields: tuple[str, ...] = ()
    identity_envelope: str | None = None
    action_propose_slot: str | None = None
    action_approve_slots: tuple[str, ...] = ()
    action_exit_window_ms: int | None = None


# Settings added after the first release leave the digest alone while they have their default,
# so re-applying an unchanged file after an upgrade is still "unchanged".
_DIGEST_DEFAULTS: dict[str, object] = {
    "clock_uncertainty_ms": DEFAULT_CLOCK_UNCERTAINTY_MS,
    "identity_case_sensitive_fields": (),
    "identity_envelope": None,
    "action_propose_slot": None,
    "action_approve_slots": (),
    "action_exit_window_ms": None,
}


def workflow_key(subscription: str, environment: str) -> str:
    """Key of a destination on the compacted workflows topic: ``subscription/environment``."""
    return f"{subscription}/{environment}"


def definition_digest(defn: WorkflowDefinition) -> str:
    """SHA-256 hex of the definition's canonical JSON (sorted keys, no whitespace).

    Equal definitions have equal digests regardless of how the TOML was laid out, which is
    what makes :func:`revise` idempotent.
    """
    document = asdict(defn)
    for name, default in _DIGEST_DEFAULTS.items():
        if document[name] == default:
            del document[name]
    canonical = orjson.dumps(document, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(canonical).hexdigest()
