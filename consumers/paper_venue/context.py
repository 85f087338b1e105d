"""What every HTTP front-end of the venue shares, and how a fault shapes an answer."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from aiohttp import web

from consumers.paper_venue.config import AccountSpec, VenueConfig
from consumers.paper_venue.engine import Exchange
from consumers.paper_venue.faults import Decision, Fault, FaultBook

T = TypeVar("T")


@dataclass
class Venue:
    """The exchange, its fault rules, its accounts and in-memory request counters."""

    exchange: Exchange
    faults: FaultBook
    config: VenueConfig
    admin_token: str
    accounts_by_key: dict[str, AccountSpec] = field(default_factory=dict)
    stats: Counter[tuple[str, str, str]] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self.accounts_by_key = self.config.account_by_key()

    def count(self, api: str, op: str, outcome: str) -> None:
        self.stats[(api, op, outcome)] += 1


class Shaper:
    """Applies fault rules to one API's requests (the API renders fault answers its own way)."""

    def __init__(
        self, venue: Venue, api: str, fault_answer: Callable[[Fault], web.StreamResponse]
    ) -> None:
        self.venue = venue
        self.api = api
        self.fault_answer = fault_answer

    def decide(
        self,
        request: web.Request,
        op: str,
        *,
        client_order_id: str | None = None,
        symbol: str | None = None,
    ) -> Decision | None:
        """The fault rule that applies to this request, if any."""
        return self.venue.faults.decide(
            op=op, api=self.api, path=request.path, client_order_id=client_order_id, symbol=symbol
        )

    async def __call__(
        self,
        request: web.Request,
        decision: Decision | None,
        perform: Callable[[], T],
        answer: Callable[[T], web.StreamResponse],
    ) -> web.StreamResponse:
        """Perform a request and answer it, as the applying fault rule (if any) says.

        A rule that does not perform the request answers at once. Otherwise the request is
        performed first (a refusal propagates and leaves the rule armed), the rule is counted,
        and then the answer is dropped, held, replaced by an error or sent as usual.
        """
        if decision is not None and not decision.fault.performs:
            self.venue.faults.applied(decision)
            return self.fault_answer(decision.fault)
        result = perform()
        if decision is None:
            return answer(result)
        self.venue.faults.applied(decision)
        fault = decision.fault
        if fault.action == "drop":
            if request.transport is not None:
                request.transport.close()
            return web.Response(status=204)  # never reaches the client: the connection is gone
        if fault.action == "hold":
            await asyncio.sleep(fault.hold_ms / 1000)
            return answer(result)
        if fault.action == "error":
            return self.fault_answer(fault)
        return answer(result)
