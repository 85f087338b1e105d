"""Workflow definitions: validation of the TOML file and revisioning.

A workflow destination is one ``(subscription, environment)``; ``paper`` and ``live`` of the
same subscription are separate destinations with separate runs. The file format is the README's
"The workflow file" (``[[workflow]]`` tables). :func:`parse_workflow_file` takes the
dictionary ``tomllib.loads`` produced (the caller does the I/O), checks *everything*, and
either returns one :class:`WorkflowDefinition` per table or raises
:class:`~streams.core.errors.WorkflowFileError` listing every problem with its path. Nothing
is partially accepted.

:func:`revise` turns a definition into the ``WorkflowRevised`` event, and returns ``None``
when the definition is unchanged, so ``sluicegate workflows apply`` publishes a new revision
only when something changed. Runs keep the revision they were admitted under (frozen
context), so publishing a revision never turns a redelivery into a new occurrence.

Defaults when a key is omitted: ``branch_timeout = "30s"``, ``branch_attempts = 3``,
``retention = "7d"``, ``validity.clock_uncertainty = "250ms"``, no immutable fields, no
scope, no auth, no case-sensitive venue/instrument fields. Bounds are in
:mod:`streams.core.limits`.

A destination's occurrence identity is fixed once applied: :func:`revise` raises
:class:`~streams.core.errors.IdentityChanged` for a definition that would key occurrences
differently (see :func:`streams.core.fields.identity_changes`).

Modules: :mod:`.definition` (the validated definition, its key and digest), :mod:`.file`
(reading a file, with :mod:`.checks`), :mod:`.revise` (the next revision).
"""

from streams.core.fields import CANDLE_CLOSE, CANDLE_OPEN_FIELD, INTERVAL_FIELD
from streams.core.limits import DEFAULT_CLOCK_UNCERTAINTY_MS
from streams.core.workflow.definition import (
    DEFAULT_BRANCH_ATTEMPTS,
    DEFAULT_BRANCH_TIMEOUT_MS,
    DEFAULT_RETENTION_MS,
    ENVIRONMENTS,
    MAX_BRANCH_ATTEMPTS,
    WorkflowDefinition,
    definition_digest,
    workflow_key,
)
from streams.core.workflow.file import parse_workflow_file
from streams.core.workflow.revise import revise

__all__ = [
    "CANDLE_CLOSE",
    "CANDLE_OPEN_FIELD",
    "DEFAULT_BRANCH_ATTEMPTS",
    "DEFAULT_BRANCH_TIMEOUT_MS",
    "DEFAULT_CLOCK_UNCERTAINTY_MS",
    "DEFAULT_RETENTION_MS",
    "ENVIRONMENTS",
    "INTERVAL_FIELD",
    "MAX_BRANCH_ATTEMPTS",
    "WorkflowDefinition",
    "definition_digest",
    "parse_workflow_file",
    "revise",
    "workflow_key",
]
