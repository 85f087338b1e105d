"""The gate's pure rules: generation order, deadlines, and what a proposal must hold.

Generation order
    A generation is the scope's sequence value in canonical form with its comparison kind:
    ``time`` (epoch milliseconds, or RFC 3339) or ``number`` (a decimal). Both are compared
    as :class:`~decimal.Decimal` values, never as text (``"10" > "9"``) and never by
    arrival. Two generations of different comparison kinds are not ordered at all.

Deadlines
    An ``entry`` is held to the run's authoritative ``expires_at_ms``. Any other kind is held
    to ``source_time_ms + exit_window_ms`` when the workflow gives it a window, and to no
    deadline at the gate otherwise. A copy carried by a dispatch request can only shorten
    it: the deadline used is the earlier of the two, the allowance the larger of the two.
    Eligible iff ``now + clock_uncertainty < expires_at`` (equality fails).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

import orjson

from schemas.events import CandidateProposed
from streams.core.durations import parse_time
from streams.core.errors import InvalidValue

ENTRY = "entry"
"""The kind whose freshness the validity window governs; every other kind has its own rule."""
GENERATION_TIME = "time"
GENERATION_NUMBER = "number"
GENERATION_KINDS = (GENERATION_TIME, GENERATION_NUMBER)
SIDES = ("buy", "sell")

SUPERSEDED_NEWER = "newer_generation"
SUPERSEDED_OLDER = "older_than_current"
SUPERSEDED_SAME = "same_generation"
EXPIRED_BEFORE_SEND = "expired_before_send"
EXPIRED_DEADLINE_PASSED = "deadline_passed"
REJECT_CANDIDATE_ID = "invalid_candidate_id"
REJECT_GENERATION = "invalid_generation"
REJECT_GENERATION_KIND = "generation_kind_mismatch"
REJECT_DEADLINE = "invalid_deadline"
REJECT_PARAMETERS = "invalid_parameters"

# Quantities and prices: plain, unsigned decimal strings (no exponent, no leading zeros).
_AMOUNT_RE = re.compile(r"(?:0|[1-9][0-9]*)(?:\.[0-9]+)?")
_KIND_RE = re.compile(r"[a-z][a-z0-9_]{0,31}")


def generation_value(generation: str, kind: str) -> Decimal | None:
    """The comparable value of a generation, or ``None`` if it cannot be read as ``kind``."""
    if kind == GENERATION_NUMBER:
        if generation != generation.strip():
            return None
        try:
            value = Decimal(generation)
        except InvalidOperation:
            return None
        return value if value.is_finite() else None
    if kind == GENERATION_TIME:
        try:
            return Decimal(parse_time(generation))
        except InvalidValue:
            return None
    return None


def candidate_deadline(proposal: CandidateProposed) -> int | None:
    """The deadline the gate holds a proposed candidate to (module docstring)."""
    if proposal.kind == ENTRY:
        return proposal.expires_at_ms
    if proposal.exit_window_ms is None:
        return None
    return proposal.source_time_ms + proposal.exit_window_ms


def earlier(first: int | None, second: int | None) -> int | None:
    """The earlier of two deadlines, ``None`` meaning "no deadline"."""
    if first is None:
        return second
    if second is None:
        return first
    return min(first, second)


def eligible(now: int, expires_at_ms: int | None, clock_uncertainty_ms: int) -> bool:
    """``now + clock_uncertainty < expires_at`` (no deadline: always eligible)."""
    return expires_at_ms is None or now + clock_uncertainty_ms < expires_at_ms


def proposal_problems(proposal: CandidateProposed) -> tuple[str, list[str]] | None:
    """``(reason, problems)`` for a proposal the gate must reject, ``None`` if it is sound.

    ``reason`` is the category of the first problem found; ``problems`` lists them all.
    """
    found: list[tuple[str, str]] = []
    if not _KIND_RE.fullmatch(proposal.kind):
        found.append((REJECT_CANDIDATE_ID, f"kind {proposal.kind!r} is not an action kind"))
    elif proposal.candidate_id != f"{proposal.run_id}.{proposal.kind}":
        found.append(
            (
                REJECT_CANDIDATE_ID,
                f"candidate_id {proposal.candidate_id!r} is not "
                f"'{proposal.run_id}.{proposal.kind}'",
            )
        )
    if proposal.generation_kind not in GENERATION_KINDS:
        found.append(
            (
                REJECT_GENERATION,
                f"generation_kind {proposal.generation_kind!r} is not time or number",
            )
        )
    elif generation_value(proposal.generation, proposal.generation_kind) is None:
        found.append(
            (
                REJECT_GENERATION,
                f"generation {proposal.generation!r} is not a {proposal.generation_kind}",
            )
        )
    if proposal.clock_uncertainty_ms < 0:
        found.append((REJECT_DEADLINE, "clock_uncertainty_ms is negative"))
    if proposal.exit_window_ms is not None and proposal.exit_window_ms < 0:
        found.append((REJECT_DEADLINE, "exit_window_ms is negative"))
    found.extend((REJECT_PARAMETERS, p) for p in _parameter_problems(proposal))
    if not found:
        return None
    return found[0][0], [problem for _, problem in found]


def _parameter_problems(proposal: CandidateProposed) -> list[str]:
    problems: list[str] = []
    if proposal.side not in SIDES:
        problems.append(f"side {proposal.side!r} is not buy or sell")
    if (proposal.quantity is None) == (proposal.notional is None):
        problems.append("exactly one of quantity and notional is required")
    for name, value, positive in (
        ("quantity", proposal.quantity, True),
        ("notional", proposal.notional, True),
        ("limit_price", proposal.limit_price, True),
        ("max_slippage_bps", proposal.max_slippage_bps, False),
    ):
        if value is not None and not _amount_ok(value, positive=positive):
            adjective = "positive" if positive else "non-negative"
            problems.append(f"{name} {value!r} is not a {adjective} decimal string")
    for name, text, required in (
        ("params_json", proposal.params_json, True),
        ("protection_json", proposal.protection_json, False),
        ("notification_json", proposal.notification_json, False),
    ):
        if (text is not None or required) and not _is_json_object(text):
            problems.append(f"{name} is not a JSON object")
    return problems


def _amount_ok(text: str, *, positive: bool) -> bool:
    if not _AMOUNT_RE.fullmatch(text):
        return False
    return Decimal(text) > 0 if positive else True


def _is_json_object(text: str | None) -> bool:
    if text is None:
        return False
    try:
        return isinstance(orjson.loads(text), dict)
    except orjson.JSONDecodeError:
        return False
