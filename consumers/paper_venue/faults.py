"""Fault injection: rules that change how the venue answers chosen requests.

A rule matches requests by operation (``place``, ``query``, ``cancel``, ``open_orders``,
``account``, ``trades``, ``notify`` (a POST to the notification sink) or ``any``) and
optionally by client order id (``newClientOrderId`` when placing, ``origClientOrderId`` when
querying or cancelling, the ``Idempotency-Key`` of a notification), symbol, request path and API
(``binance`` or ``native``). It lets the first ``skip`` matching requests through, then applies to
the next ``count`` of them (``null``: every one). Rules are tried in creation order and the
first live one that matches decides. Actions:

=============  =========================================================================
``drop``       perform the request (the order is stored), then close the connection
               without an answer
``hold``       perform the request, then hold the answer ``hold_ms`` (longer than the
               client's timeout) before sending it
``error``      answer ``status`` (5xx, default 503) with ``code``/``msg`` (default -1007,
               "execution status unknown"); ``accept`` (required) says whether the request
               is performed first
``reject``     refuse without performing: ``status`` (4xx, default 400), ``code``/``msg``
               (default -2010 insufficient balance)
``not_found``  perform and answer normally, but queries say "order does not exist" for
               ``quiet_ms`` after acceptance (also allowed on drop/hold/error)
=============  =========================================================================

Rules and their counters are durable (a restarted venue keeps an armed fault armed). A rule
whose request is refused by the venue for its own reasons (a bad signature, no balance) does
not count as applied: it stays armed for the next request.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from consumers.paper_venue.errors import MSG_INSUFFICIENT, MSG_STATUS_UNKNOWN
from consumers.paper_venue.rows import FaultRow
from consumers.paper_venue.store import Store

OPS = frozenset({"place", "query", "cancel", "open_orders", "account", "trades", "notify", "any"})
ACTIONS = frozenset({"drop", "hold", "error", "reject", "not_found"})
APIS = frozenset({"binance", "native"})
MAX_HOLD_MS = 600_000


class FaultSpecError(ValueError):
    """A fault rule that cannot be used; the message names the field."""


@dataclass(frozen=True)
class Fault:
    """One fault rule (see the module docstring for the meaning of each field)."""

    name: str
    action: str
    op: str = "place"
    client_order_id: str | None = None
    symbol: str | None = None
    path: str | None = None
    api: str | None = None
    count: int | None = 1
    skip: int = 0
    accept: bool = True
    hold_ms: int = 30_000
    status: int = 503
    code: int = -1007
    msg: str = MSG_STATUS_UNKNOWN
    quiet_ms: int = 0

    @property
    def performs(self) -> bool:
        """Whether the request is carried out before the fault shapes the answer."""
        return self.action in ("drop", "hold", "not_found") or (
            self.action == "error" and self.accept
        )

    def matches(
        self, *, op: str, api: str, path: str, client_order_id: str | None, symbol: str | None
    ) -> bool:
        return (
            self.op in (op, "any")
            and (self.api is None or self.api == api)
            and (self.path is None or self.path == path)
            and (self.client_order_id is None or self.client_order_id == client_order_id)
            and (self.symbol is None or self.symbol == symbol)
        )


def parse_fault(obj: object, default_name: str) -> Fault:
    """A :class:`Fault` from its JSON/TOML form; :class:`FaultSpecError` says what is wrong."""
    if not isinstance(obj, dict):
        raise FaultSpecError("a fault is a JSON object")
    known = set(Fault.__dataclass_fields__)
    unknown = sorted(set(obj) - known)
    if unknown:
        raise FaultSpecError(f"unknown field(s): {', '.join(unknown)}")
    action = obj.get("action")
    if action not in ACTIONS:
        raise FaultSpecError(f"'action' must be one of {', '.join(sorted(ACTIONS))}")
    if action == "error" and not isinstance(obj.get("accept"), bool):
        raise FaultSpecError("an 'error' fault needs 'accept': true (performed) or false")
    values: dict[str, Any] = {"name": default_name, "action": action}
    if action == "reject":
        values.update(status=400, code=-2010, msg=MSG_INSUFFICIENT)
    values.update(obj)
    fault = Fault(**{k: values[k] for k in values if k in known})
    _check(fault)
    return fault


def _check(f: Fault) -> None:
    def need(ok: bool, message: str) -> None:
        if not ok:
            raise FaultSpecError(message)

    need(isinstance(f.name, str) and 0 < len(f.name) <= 100, "'name' must be 1-100 characters")
    need(f.op in OPS, f"'op' must be one of {', '.join(sorted(OPS))}")
    need(f.api is None or f.api in APIS, "'api' must be 'binance' or 'native'")
    for name in ("client_order_id", "symbol", "path"):
        value = getattr(f, name)
        need(value is None or isinstance(value, str), f"'{name}' must be a string")
    need(f.count is None or (_int(f.count) and f.count > 0), "'count' must be positive or null")
    for name, top in (("skip", 10**9), ("hold_ms", MAX_HOLD_MS), ("quiet_ms", 86_400_000)):
        value = getattr(f, name)
        need(_int(value) and 0 <= value <= top, f"'{name}' must be an integer in 0..{top}")
    need(isinstance(f.accept, bool), "'accept' must be true or false")
    need(_int(f.code) and isinstance(f.msg, str), "'code' must be an integer, 'msg' a string")
    need(_int(f.status), "'status' must be an integer")
    if f.action == "error":
        need(500 <= f.status <= 599, "an 'error' fault answers a 5xx 'status'")
    if f.action == "reject":
        need(400 <= f.status <= 499, "a 'reject' fault answers a 4xx 'status'")
    if f.action == "hold":
        need(f.hold_ms > 0, "a 'hold' fault needs 'hold_ms' > 0")
    if f.action == "not_found":
        need(f.quiet_ms > 0 and f.op == "place", "'not_found' needs op 'place' and quiet_ms > 0")
    if f.quiet_ms:
        need(f.op == "place" and f.performs, "'quiet_ms' applies to performed placements only")


def _int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class Decision:
    """A live rule that matched one request; :meth:`FaultBook.applied` records it."""

    fault_id: int
    fault: Fault


class FaultBook:
    """The durable list of rules, mirrored in memory so matching costs no query."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._rules: list[tuple[FaultRow, Fault]] = []
        self._reload()

    def _reload(self) -> None:
        self._rules = [
            (row, parse_fault(json.loads(row.spec), row.name)) for row in self._store.faults()
        ]

    def add(self, fault: Fault, now_ms: int) -> int | None:
        """Store a rule; None if one with that name exists already."""
        spec = json.dumps(asdict(fault), sort_keys=True)
        with self._store.transaction():
            fault_id = self._store.insert_fault(fault.name, spec, now_ms)
        self._reload()
        return fault_id

    def delete(self, fault_id: int | None = None) -> int:
        """Delete one rule (or all of them); the number deleted."""
        with self._store.transaction():
            deleted = self._store.delete_faults(fault_id)
        self._reload()
        return deleted

    def rules(self) -> list[dict[str, object]]:
        """Every rule with its counters, for the admin API."""
        return [
            {"id": row.fault_id, **asdict(f), "matched": row.matched, "applied": row.applied}
            for row, f in self._rules
        ]

    def decide(
        self, *, op: str, api: str, path: str, client_order_id: str | None, symbol: str | None
    ) -> Decision | None:
        """The rule that applies to this request, if any.

        A matching rule still in its ``skip`` phase counts the request as matched and lets it
        through (None). The caller reports an applied rule with :meth:`applied` once its effect
        happened.
        """
        for index, (row, fault) in enumerate(self._rules):
            if fault.count is not None and row.applied >= fault.count:
                continue
            if not fault.matches(
                op=op, api=api, path=path, client_order_id=client_order_id, symbol=symbol
            ):
                continue
            if row.matched < fault.skip:
                self._count(index, row.matched + 1, row.applied)
                return None
            return Decision(row.fault_id, fault)
        return None

    def applied(self, decision: Decision) -> None:
        """Count ``decision`` as applied (and matched)."""
        for index, (row, _) in enumerate(self._rules):
            if row.fault_id == decision.fault_id:
                self._count(index, row.matched + 1, row.applied + 1)
                return

    def _count(self, index: int, matched: int, applied: int) -> None:
        row, fault = self._rules[index]
        with self._store.transaction():
            self._store.count_fault(row.fault_id, matched, applied)
        self._rules[index] = (
            FaultRow(row.fault_id, row.name, row.spec, matched, applied, row.created_ms),
            fault,
        )
