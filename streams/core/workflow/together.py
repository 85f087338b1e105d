"""The checks of a workflow file that read several of its settings together."""

from __future__ import annotations

import re

from streams.core.fields import CANDLE_CLOSE, CANDLE_OPEN_FIELD, CLOUDEVENTS
from streams.core.workflow.checks import Checker, show

# In a CloudEvents workflow: a context attribute, the data itself, or one member of data.
_CE_FIELD_RE = re.compile(r"[a-z0-9]{1,64}|data|data_base64|data\.[A-Za-z0-9_][A-Za-z0-9_-]{0,122}")
_CE_FIELD = "CloudEvents field (an attribute such as time or subject, or data.<member>)"


def cloudevents_fields(
    checker: Checker,
    path: str,
    *,
    immutable: tuple[str, ...] | None,
    source_time: str | None,
    scope_fields: tuple[str, ...] | None,
    sequence: str | None,
) -> None:
    """Every field of a CloudEvents workflow names an attribute or ``data.<member>``."""
    named = [(f"{path}.content.immutable[{i}]", n) for i, n in enumerate(immutable or ())]
    named += [(f"{path}.scope.fields[{i}]", n) for i, n in enumerate(scope_fields or ())]
    if sequence is not None:
        named.append((f"{path}.scope.sequence", sequence))
    for where, name in named:
        if not _CE_FIELD_RE.fullmatch(name):
            checker.problem(where, f"{show(name)} is not a {_CE_FIELD}")
    if source_time is None:
        return
    where = f"{path}.validity.source_time"
    if source_time == CANDLE_CLOSE:
        checker.problem(
            where, 'candle_close is not read from CloudEvents: use "time" or data.<member>'
        )
    elif not _CE_FIELD_RE.fullmatch(source_time) or source_time in ("data", "data_base64"):
        checker.problem(
            where, f'{show(source_time)} is not "time", another attribute or data.<member>'
        )


def scope_shared(
    checker: Checker,
    path: str,
    scope_fields: tuple[str, ...] | None,
    *,
    sequence: str | None,
    event_id: str | None,
    source_time: str | None,
    envelope: str | None,
) -> None:
    """Refuse a scope field that differs with every signal: the sequence, the source time
    (``candle_open`` for ``candle_close``) or the event id. Each signal would be a
    decision scope of its own, so none could supersede another, and the gate, which
    keeps every scope, would keep one per signal."""
    per_signal: dict[str, str] = {}
    if sequence is not None:
        per_signal[sequence] = "the scope's sequence"
    if source_time == CANDLE_CLOSE:
        per_signal.setdefault(CANDLE_OPEN_FIELD, "the source time's candle_open")
    elif source_time is not None:
        per_signal.setdefault(source_time, "the source time")
    if event_id is not None:
        per_signal.setdefault(event_id, "the sender's event id")
    if envelope == CLOUDEVENTS:
        per_signal.setdefault("id", "the event's id")
    for i, name in enumerate(scope_fields or ()):
        what = per_signal.get(name)
        if what is not None:
            checker.problem(
                f"{path}.scope.fields[{i}]",
                f"{show(name)} is {what}, which differs with every signal: each would be "
                "a decision scope of its own and no signal could supersede another (the "
                "gate would also keep a scope per signal); scope by what signals share, "
                "such as account, instrument and side",
            )
