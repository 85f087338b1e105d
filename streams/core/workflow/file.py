"""Reading a workflow file: every ``[[workflow]]`` table checked, every problem listed."""

from __future__ import annotations

import re
from collections.abc import Mapping

from streams.core.errors import WorkflowFileError
from streams.core.fields import CASE_FOLDED_FIELDS, CLOUDEVENTS
from streams.core.limits import (
    DEFAULT_CLOCK_UNCERTAINTY_MS,
    MAX_BRANCH_TIMEOUT_MS,
    MAX_CLOCK_UNCERTAINTY_MS,
    MAX_RETENTION_MS,
    MAX_SLOTS,
    MAX_WINDOW_MS,
)
from streams.core.workflow.checks import Checker, show
from streams.core.workflow.definition import (
    DEFAULT_BRANCH_ATTEMPTS,
    DEFAULT_BRANCH_TIMEOUT_MS,
    DEFAULT_RETENTION_MS,
    ENVIRONMENTS,
    MAX_BRANCH_ATTEMPTS,
    WorkflowDefinition,
    workflow_key,
)
from streams.core.workflow.together import cloudevents_fields, scope_shared

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
    "actions",
    "auth",
)
_TABLE_KEYS = {
    "identity": ("event_id", "derived", "case_sensitive", "envelope"),
    "content": ("immutable",),
    "validity": ("source_time", "window", "clock_uncertainty"),
    "scope": ("fields", "sequence"),
    "actions": ("propose", "approve", "exit_window"),
    "auth": ("token_env", "hmac_secret_env"),
}


def parse_workflow_file(document: Mapping[str, object]) -> list[WorkflowDefinition]:
    """Validate a parsed workflow file and return its definitions in file order.

    Collects every problem before raising :class:`WorkflowFileError`; each problem names its
    path (``workflow[0].validity.window: ...``). Checks: known keys only (typos are
    problems, not silently ignored), names, durations > 0 and within their bounds, non-empty
    unique slots, at least one identity route (``event_id`` or a non-empty ``derived``
    list), no duplicate field lists, list lengths within :mod:`streams.core.limits`, a
    ``validity`` table, ``scope.sequence`` only with ``scope.fields``, ``case_sensitive``
    naming only case-folded fields, ``identity.envelope = "cloudevents"`` without ``event_id``
    or ``derived`` and with every field name a CloudEvents one (an attribute or
    ``data.<member>``; the source time not ``candle_close``), at least one auth method in an
    ``[auth]`` table (both may be declared: a signed request is judged by its signature,
    another by its token), an ``[actions]`` table only with ``scope.fields``, whose
    ``propose`` is one of the slots and whose ``approve`` lists other slots, and no
    destination declared twice in one file.
    """
    checker = _Reader(_TABLE_KEYS)
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


class _Reader(Checker):
    """The workflow tables of one file (on the primitive checks of :class:`Checker`)."""

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
                f"{path}.environment", f"{show(environment_value)} is not one of paper, live"
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
                f"{show(attempts_value)} is not a whole number from 1 to {MAX_BRANCH_ATTEMPTS}",
            )

        event_id, derived, case_sensitive, envelope = self._identity(path, table)
        immutable = self._content(path, table)
        source_time, window, uncertainty = self._validity(path, table)
        scope_fields, sequence = self._scope(path, table)
        if envelope == CLOUDEVENTS:
            cloudevents_fields(
                self,
                path,
                immutable=immutable,
                source_time=source_time,
                scope_fields=scope_fields,
                sequence=sequence,
            )
        scope_shared(
            self,
            path,
            scope_fields,
            sequence=sequence,
            event_id=event_id,
            source_time=source_time,
            envelope=envelope,
        )
        actions = self._actions(path, table, slots, scope_fields)
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
            or actions is None
        ):
            return None
        propose, approve, exit_window = actions
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
            identity_envelope=envelope,
            action_propose_slot=propose,
            action_approve_slots=approve,
            action_exit_window_ms=exit_window,
        )

    def _identity(
        self, path: str, table: Mapping[str, object]
    ) -> tuple[str | None, tuple[str, ...] | None, tuple[str, ...] | None, str | None]:
        identity = self.table(path, table, "identity")
        where = f"{path}.identity"
        if identity is None:
            if "identity" not in table:
                self.problem(
                    where, 'is required: declare event_id, derived, or envelope = "cloudevents"'
                )
            return None, None, None, None
        case_sensitive = self._case_sensitive(where, identity.get("case_sensitive"))
        envelope = identity.get("envelope")
        if envelope is not None:
            if envelope != CLOUDEVENTS:
                self.problem(f"{where}.envelope", f'{show(envelope)} is not "{CLOUDEVENTS}"')
                return None, None, case_sensitive, None
            for key in ("event_id", "derived"):
                if key in identity:
                    self.problem(
                        f"{where}.{key}",
                        "a CloudEvents identity is the event's source and id: remove "
                        f"{key} (fields are read from data.<member>)",
                    )
            return None, (), case_sensitive, CLOUDEVENTS
        event_id: str | None = None
        if identity.get("event_id") is not None:
            event_id = self.name(
                f"{where}.event_id", identity.get("event_id"), _FIELD_RE, "field name"
            )
        derived = self.names(
            f"{where}.derived", identity.get("derived"), _FIELD_RE, "field name", required=False
        )
        if identity.get("event_id") is None and not identity.get("derived"):
            self.problem(
                where,
                "needs an identity route: event_id (the sender's stable id field), a "
                'non-empty derived field list, or envelope = "cloudevents"',
            )
            return event_id, None, case_sensitive, None
        return event_id, derived, case_sensitive, None

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
                    f"{show(name)} is not case-folded, so it cannot be kept case-sensitive; "
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

    def _actions(
        self,
        path: str,
        table: Mapping[str, object],
        slots: tuple[str, ...] | None,
        scope_fields: tuple[str, ...] | None,
    ) -> tuple[str | None, tuple[str, ...], int | None] | None:
        actions = self.table(path, table, "actions")
        if actions is None:
            return None if "actions" in table else (None, (), None)
        where = f"{path}.actions"
        before = len(self.problems)
        propose: str | None = None
        if actions.get("propose") is None:
            self.problem(f"{where}.propose", "is required (the slot whose result proposes)")
        else:
            propose = self.name(f"{where}.propose", actions.get("propose"), _NAME_RE, "slot name")
        approve = self.names(
            f"{where}.approve", actions.get("approve"), _NAME_RE, "slot name", required=False
        )
        exit_window: int | None = None
        if actions.get("exit_window") is not None:
            exit_window = self.duration(
                f"{where}.exit_window", actions.get("exit_window"), None, most=MAX_WINDOW_MS
            )
        if slots is not None and propose is not None and propose not in slots:
            self.problem(f"{where}.propose", f"{show(propose)} is not one of the slots")
        for i, name in enumerate(approve or ()):
            if name == propose:
                self.problem(
                    f"{where}.approve[{i}]",
                    f"{show(name)} is the proposing slot; approvals are other slots",
                )
            elif slots is not None and name not in slots:
                self.problem(f"{where}.approve[{i}]", f"{show(name)} is not one of the slots")
        if scope_fields == ():
            self.problem(
                where,
                "needs a decision scope: declare [workflow.scope] fields (for example "
                "account, instrument, side) so that candidates can supersede each other",
            )
        if len(self.problems) != before or approve is None:
            return None
        return propose, approve, exit_window

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
