"""Turning a definition into the next revision of its destination (``WorkflowRevised``)."""

from __future__ import annotations

from schemas.events import WorkflowRevised
from streams.core.errors import CoreError, IdentityChanged
from streams.core.fields import identity_changes
from streams.core.retention import next_history
from streams.core.workflow.definition import WorkflowDefinition, definition_digest, workflow_key


def revise(
    current: WorkflowRevised | None, defn: WorkflowDefinition, now: int
) -> WorkflowRevised | None:
    """Return the next ``WorkflowRevised`` for ``defn``, or ``None`` if nothing changed.

    ``current`` is the newest revision on the workflows topic for the same destination (or
    ``None``). The new revision number is ``current.revision + 1`` (``1`` for a new
    destination); ``applied_at_ms`` is ``now``; ``retention_history`` continues
    ``current``'s (:func:`streams.core.retention.next_history`). Raises
    :class:`~streams.core.errors.IdentityChanged` if ``defn`` would change the occurrence
    identity, and :class:`~streams.core.errors.CoreError` if ``current`` belongs to another
    destination, which would mean the caller looked up the wrong key.
    """
    if current is not None and (current.subscription, current.environment) != (
        defn.subscription,
        defn.environment,
    ):
        raise CoreError(
            f"revision for {workflow_key(current.subscription, current.environment)} "
            f"cannot revise {workflow_key(defn.subscription, defn.environment)}"
        )
    digest = definition_digest(defn)
    if current is not None and current.definition_digest == digest:
        return None
    if current is not None:
        changes = identity_changes(current, defn)
        if changes:
            raise IdentityChanged(workflow_key(defn.subscription, defn.environment), changes)
    return WorkflowRevised(
        subscription=defn.subscription,
        environment=defn.environment,
        revision=1 if current is None else current.revision + 1,
        slots=defn.slots,
        branch_timeout_ms=defn.branch_timeout_ms,
        retention_ms=defn.retention_ms,
        identity_event_id_field=defn.identity_event_id_field,
        identity_derived_fields=defn.identity_derived_fields,
        immutable_fields=defn.immutable_fields,
        validity_source_time=defn.validity_source_time,
        validity_window_ms=defn.validity_window_ms,
        scope_fields=defn.scope_fields,
        scope_sequence_field=defn.scope_sequence_field,
        auth_token_env=defn.auth_token_env,
        auth_hmac_secret_env=defn.auth_hmac_secret_env,
        definition_digest=digest,
        applied_at_ms=now,
        branch_attempts=defn.branch_attempts,
        clock_uncertainty_ms=defn.clock_uncertainty_ms,
        identity_case_sensitive_fields=defn.identity_case_sensitive_fields,
        retention_history=next_history(current, defn.retention_ms, now),
        identity_envelope=defn.identity_envelope,
        action_propose_slot=defn.action_propose_slot,
        action_approve_slots=defn.action_approve_slots,
        action_exit_window_ms=defn.action_exit_window_ms,
    )
