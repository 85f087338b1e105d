"""Workflow definitions: validation of the TOML file and revisioning.

A workflow destination is one ``(subscription, environment)``; ``paper`` and ``live`` of the
same subscription are separate destinations with separate runs. The file format is the one
in CONTRACT.md (``[[workflow]]`` tables). :func:`parse_workflow_file` takes the dictionary
``tomllib.loads`` produced (the caller does the I/O), checks *everything*, and either returns
one :class:`WorkflowDefinition` per table or raises
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
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import orjson

from schemas.events import WorkflowRevised
from streams.core.durations import DURATION_FORMS, format_duration, parse_duration
from streams.core.errors import CoreError, IdentityChanged, InvalidValue, WorkflowFileError
from streams.core.fields import (
    CANDLE_CLOSE,
    CANDLE_OPEN_FIELD,
    CASE_FOLDED_FIELDS,
    INTERVAL_FIELD,
    identity_changes,
)
from streams.core.limits import (
    DEFAULT_CLOCK_UNCERTAINTY_MS,
    MAX_BRANCH_TIMEOUT_MS,
    MAX_CLOCK_UNCERTAINTY_MS,
    MAX_FIELDS,
    MAX_RETENTION_MS,
    MAX_SLOTS,
    MAX_WINDOW_MS,
)
from streams.core.retention import next_history

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

ENVIRONMENTS = ("paper", "live")

DEFAULT_BRANCH_TIMEOUT_MS = 30_000
DEFAULT_BRANCH_ATTEMPTS = 3
DEFAULT_RETENTION_MS = 7 * 24 * 3_600_000
MAX_BRANCH_ATTEMPTS = 100

# Destination and slot names become parts of Kafka keys and URLs; keep them plain so the
# keys stay readable and never need escaping.
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_FIELD_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
_ENV_VAR_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")

_WORKFLOW_KEYS = (
    "subscription",
    "environment",
    "slots",
    "branch_timeout",
    "branch_attempts",
    "retention",
    "identity",
    "content",
    "validity",
    "scope",
    "auth",
)
_TABLE_KEYS = {
    "identity": ("event_id", "derived", "case_sensitive"),
    "content": ("immutable",),
    "validity": ("source_time", "window", "clock_uncertainty"),
    "scope": ("fields", "sequence"),
    "auth": ("token_env", "hmac_secret_env"),
}


@dataclass(frozen=True)
class WorkflowDefinition:
    """One validated ``[[workflow]]`` table. All durations are milliseconds.

    ``branch_attempts`` is the maximum number of launches per slot (relaunches + 1), frozen
    on each run. ``identity_case_sensitive_fields`` lists venue/instrument fields that are
    kept as given instead of case-folded (:mod:`streams.core.fields`).
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


# Settings added after the first release leave the digest alone while they have their default,
# so re-applying an unchanged file after an upgrade is still "unchanged".
_DIGEST_DEFAULTS: dict[str, object] = {
    "clock_uncertainty_ms": DEFAULT_CLOCK_UNCERTAINTY_MS,
    "identity_case_sensitive_fields": (),
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
    )


def parse_workflow_file(document: Mapping[str, object]) -> list[WorkflowDefinition]:
    """Validate a parsed workflow file and return its definitions in file order.

    Collects every problem before raising :class:`WorkflowFileError`; each problem names its
    path (``workflow[0].validity.window: ...``). Checks: known keys only (typos are
    problems, not silently ignored), names, durations > 0 and within their bounds, non-empty
    unique slots, at least one identity route (``event_id`` or a non-empty ``derived``
    list), no duplicate field lists, list lengths within :mod:`streams.core.limits`, a
    ``validity`` table, ``scope.sequence`` only with ``scope.fields``, ``case_sensitive``
    naming only case-folded fields, at least one auth method in an ``[auth]`` table (both
    may be declared: a signed request is judged by its signature, another by its token), and
    no destination declared twice in one file.
    """
    checker = _Checker()
    for key in document:
        if key != "workflow":
            checker.problem(str(key), "unknown top-level key (expected [[workflow]] tables)")
    tables = document.get("workflow")
    if tables is None:
        checker.problem("workflow", "no [[workflow]] tables in the file")
        raise WorkflowFileError(checker.problems)
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        checker.problem("workflow", "must be an array of tables ([[workflow]])")
        raise WorkflowFileError(checker.problems)
    if not tables:
        checker.problem("workflow", "no [[workflow]] tables in the file")

    definitions: list[WorkflowDefinition] = []
    seen: dict[tuple[str, str], int] = {}
    for index, table in enumerate(tables):
        path = f"workflow[{index}]"
        before = len(checker.problems)
        defn = checker.workflow(path, table)
        if defn is None or len(checker.problems) != before:
            continue
        destination = (defn.subscription, defn.environment)
        if destination in seen:
            checker.problem(
                path,
                f"duplicate destination {workflow_key(*destination)} "
                f"(also workflow[{seen[destination]}])",
            )
            continue
        seen[destination] = index
        definitions.append(defn)
    if checker.problems:
        raise WorkflowFileError(checker.problems)
    return definitions


def _show(value: object) -> str:
    """Quote a value the way the file spells it (JSON-like), for problem messages."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return repr(value)


class _Checker:
    """Accumulates problems while reading one file; every reader returns a value or None."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def problem(self, path: str, message: str) -> None:
        self.problems.append(f"{path}: {message}")

    def unknown_keys(self, path: str, table: Mapping[str, object], known: Sequence[str]) -> None:
        for key in table:
            if key not in known:
                self.problem(f"{path}.{key}", f"unknown key (expected one of {', '.join(known)})")

    def table(self, path: str, parent: Mapping[str, object], key: str) -> dict[str, object] | None:
        value = parent.get(key)
        if value is None:
            return None
        if not isinstance(value, dict):
            self.problem(f"{path}.{key}", f"must be a table ([{key}]), got {_show(value)}")
            return None
        self.unknown_keys(f"{path}.{key}", value, _TABLE_KEYS[key])
        return value

    def name(self, path: str, value: object, pattern: re.Pattern[str], what: str) -> str | None:
        if not isinstance(value, str) or not pattern.fullmatch(value):
            self.problem(path, f"{_show(value)} is not a valid {what}")
            return None
        return value

    def names(
        self,
        path: str,
        value: object,
        pattern: re.Pattern[str],
        what: str,
        *,
        required: bool,
        most: int = MAX_FIELDS,
    ) -> tuple[str, ...] | None:
        if value is None:
            if required:
                self.problem(path, f"is required (a list of {what}s)")
            return None if required else ()
        if not isinstance(value, list):
            self.problem(path, f"must be a list of {what}s, got {_show(value)}")
            return None
        result: list[str] = []
        ok = True
        for i, item in enumerate(value):
            name = self.name(f"{path}[{i}]", item, pattern, what)
            if name is None:
                ok = False
            elif name in result:
                self.problem(f"{path}[{i}]", f"{_show(name)} is listed twice")
                ok = False
            else:
                result.append(name)
        if required and not value:
            self.problem(path, f"must list at least one {what}")
            ok = False
        if len(value) > most:
            self.problem(path, f"lists {len(value)} {what}s; at most {most} are allowed")
            ok = False
        return tuple(result) if ok else None

    def duration(
        self,
        path: str,
        value: object,
        default: int | None,
        *,
        most: int,
        positive: bool = True,
    ) -> int | None:
        if value is None:
            if default is None:
                self.problem(path, f"is required ({DURATION_FORMS})")
            return default
        try:
            ms = parse_duration(value)
        except InvalidValue:
            self.problem(path, f"{_show(value)} is not a duration ({DURATION_FORMS})")
            return None
        if positive and ms <= 0:
            self.problem(path, f"{_show(value)} must be longer than 0")
            return None
        if ms > most:
            self.problem(path, f"{_show(value)} is too long: at most {format_duration(most)}")
            return None
        return ms

    def workflow(self, path: str, table: Mapping[str, object]) -> WorkflowDefinition | None:
        self.unknown_keys(path, table, _WORKFLOW_KEYS)

        subscription = self.name(
            f"{path}.subscription",
            table.get("subscription"),
            _NAME_RE,
            "subscription name (letters, digits, '.', '_', '-')",
        )
        environment_value = table.get("environment")
        environment: str | None = None
        if environment_value in ENVIRONMENTS:
            environment = str(environment_value)
        else:
            self.problem(
                f"{path}.environment", f"{_show(environment_value)} is not one of paper, live"
            )
        slots = self.names(
            f"{path}.slots",
            table.get("slots"),
            _NAME_RE,
            "slot name",
            required=True,
            most=MAX_SLOTS,
        )
        branch_timeout = self.duration(
            f"{path}.branch_timeout",
            table.get("branch_timeout"),
            DEFAULT_BRANCH_TIMEOUT_MS,
            most=MAX_BRANCH_TIMEOUT_MS,
        )
        retention = self.duration(
            f"{path}.retention",
            table.get("retention"),
            DEFAULT_RETENTION_MS,
            most=MAX_RETENTION_MS,
        )

        attempts_value = table.get("branch_attempts", DEFAULT_BRANCH_ATTEMPTS)
        branch_attempts: int | None = None
        if (
            isinstance(attempts_value, int)
            and not isinstance(attempts_value, bool)
            and 1 <= attempts_value <= MAX_BRANCH_ATTEMPTS
        ):
            branch_attempts = attempts_value
        else:
            self.problem(
                f"{path}.branch_attempts",
                f"{_show(attempts_value)} is not a whole number from 1 to {MAX_BRANCH_ATTEMPTS}",
            )

        event_id, derived, case_sensitive = self._identity(path, table)
        immutable = self._content(path, table)
        source_time, window, uncertainty = self._validity(path, table)
        scope_fields, sequence = self._scope(path, table)
        token_env, hmac_env = self._auth(path, table)

        if (
            subscription is None
            or environment is None
            or slots is None
            or branch_timeout is None
            or retention is None
            or branch_attempts is None
            or derived is None
            or immutable is None
            or case_sensitive is None
            or source_time is None
            or window is None
            or uncertainty is None
            or scope_fields is None
        ):
            return None
        return WorkflowDefinition(
            subscription=subscription,
            environment=environment,
            slots=slots,
            branch_timeout_ms=branch_timeout,
            branch_attempts=branch_attempts,
            retention_ms=retention,
            identity_event_id_field=event_id,
            identity_derived_fields=derived,
            immutable_fields=immutable,
            validity_source_time=source_time,
            validity_window_ms=window,
            scope_fields=scope_fields,
            scope_sequence_field=sequence,
            auth_token_env=token_env,
            auth_hmac_secret_env=hmac_env,
            clock_uncertainty_ms=uncertainty,
            identity_case_sensitive_fields=case_sensitive,
        )

    def _identity(
        self, path: str, table: Mapping[str, object]
    ) -> tuple[str | None, tuple[str, ...] | None, tuple[str, ...] | None]:
        identity = self.table(path, table, "identity")
        where = f"{path}.identity"
        if identity is None:
            if "identity" not in table:
                self.problem(where, "is required: declare event_id, derived, or both")
            return None, None, None
        event_id: str | None = None
        if identity.get("event_id") is not None:
            event_id = self.name(
                f"{where}.event_id", identity.get("event_id"), _FIELD_RE, "field name"
            )
        derived = self.names(
            f"{where}.derived", identity.get("derived"), _FIELD_RE, "field name", required=False
        )
        case_sensitive = self._case_sensitive(where, identity.get("case_sensitive"))
        if identity.get("event_id") is None and not identity.get("derived"):
            self.problem(
                where,
                "needs an identity route: event_id (the sender's stable id field) or a "
                "non-empty derived field list",
            )
            return event_id, None, case_sensitive
        return event_id, derived, case_sensitive

    def _case_sensitive(self, where: str, value: object) -> tuple[str, ...] | None:
        path = f"{where}.case_sensitive"
        names = self.names(path, value, _FIELD_RE, "field name", required=False)
        if names is None:
            return None
        ok = True
        for i, name in enumerate(names):
            if name not in CASE_FOLDED_FIELDS:
                self.problem(
                    f"{path}[{i}]",
                    f"{_show(name)} is not case-folded, so it cannot be kept case-sensitive; "
                    f"list at most these: {', '.join(CASE_FOLDED_FIELDS)}",
                )
                ok = False
        return names if ok else None

    def _content(self, path: str, table: Mapping[str, object]) -> tuple[str, ...] | None:
        content = self.table(path, table, "content")
        if content is None:
            return None if "content" in table else ()
        return self.names(
            f"{path}.content.immutable",
            content.get("immutable"),
            _FIELD_RE,
            "field name",
            required=False,
        )

    def _validity(
        self, path: str, table: Mapping[str, object]
    ) -> tuple[str | None, int | None, int | None]:
        validity = self.table(path, table, "validity")
        where = f"{path}.validity"
        if validity is None:
            if "validity" not in table:
                self.problem(where, "is required: declare source_time and window")
            return None, None, None
        source_time_value = validity.get("source_time")
        source_time: str | None = None
        if source_time_value is None:
            self.problem(
                f"{where}.source_time",
                "is required (a field name, or candle_close for candle_open + interval)",
            )
        else:
            source_time = self.name(
                f"{where}.source_time",
                source_time_value,
                _FIELD_RE,
                "field name (or candle_close)",
            )
        window = self.duration(f"{where}.window", validity.get("window"), None, most=MAX_WINDOW_MS)
        uncertainty = self.duration(
            f"{where}.clock_uncertainty",
            validity.get("clock_uncertainty"),
            DEFAULT_CLOCK_UNCERTAINTY_MS,
            most=MAX_CLOCK_UNCERTAINTY_MS,
            positive=False,
        )
        return source_time, window, uncertainty

    def _scope(
        self, path: str, table: Mapping[str, object]
    ) -> tuple[tuple[str, ...] | None, str | None]:
        scope = self.table(path, table, "scope")
        if scope is None:
            return (None if "scope" in table else ()), None
        where = f"{path}.scope"
        fields = self.names(
            f"{where}.fields", scope.get("fields"), _FIELD_RE, "field name", required=True
        )
        sequence: str | None = None
        if scope.get("sequence") is not None:
            sequence = self.name(
                f"{where}.sequence", scope.get("sequence"), _FIELD_RE, "field name"
            )
            if sequence is None:
                return None, None
        return fields, sequence

    def _auth(self, path: str, table: Mapping[str, object]) -> tuple[str | None, str | None]:
        auth = self.table(path, table, "auth")
        if auth is None:
            return None, None
        where = f"{path}.auth"
        token: str | None = None
        hmac: str | None = None
        if auth.get("token_env") is not None:
            token = self.name(
                f"{where}.token_env", auth.get("token_env"), _ENV_VAR_RE, "environment variable"
            )
        if auth.get("hmac_secret_env") is not None:
            hmac = self.name(
                f"{where}.hmac_secret_env",
                auth.get("hmac_secret_env"),
                _ENV_VAR_RE,
                "environment variable",
            )
        if auth.get("token_env") is None and auth.get("hmac_secret_env") is None:
            self.problem(where, "declare token_env, hmac_secret_env or both (or remove [auth])")
        return token, hmac
