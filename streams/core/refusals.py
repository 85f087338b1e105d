"""What a first delivery is refused for beyond its identity: the admission bounds on content.

Pure functions shared by the processor (:func:`streams.core.admission.decide`, with its
clock) and the front doors' intake (:func:`streams.core.intake.intake`, with theirs), so the
webhook and ``sluicegate publish`` refuse early, with the same reasons and the same field
names, what admission would reject:

* ``payload_too_large``: the payload is over :data:`~streams.core.limits.MAX_PAYLOAD_BYTES`
  as canonical JSON;
* ``source_time_in_future``: the source time is later than ``now`` plus the workflow's
  ``clock_uncertainty`` (a sender must not extend its own validity).

The processor applies the second only to a first delivery: a copy of an admitted occurrence
is compared with it instead (a differing source time is an ``OccurrenceConflict``).
"""

from __future__ import annotations

from schemas.events import WorkflowRevised
from streams.core.durations import format_duration, format_time
from streams.core.errors import FieldProblem, FieldRole, Refusal
from streams.core.fields import CANDLE_CLOSE, CANDLE_OPEN_FIELD
from streams.core.identity import Occurrence
from streams.core.limits import MAX_ID_CHARS, MAX_PAYLOAD_BYTES
from streams.core.reasons import REJECT_PAYLOAD_TOO_LARGE, REJECT_SOURCE_TIME_IN_FUTURE


def payload_refusal(payload_json: str) -> Refusal | None:
    """``payload_too_large`` when ``payload_json`` is over :data:`MAX_PAYLOAD_BYTES`."""
    # Characters never outnumber UTF-8 bytes, so most payloads need no encoding to decide.
    if len(payload_json) <= MAX_PAYLOAD_BYTES // 4:
        return None
    size = len(payload_json.encode("utf-8", "surrogatepass"))
    if size <= MAX_PAYLOAD_BYTES:
        return None
    message = (
        f"is {size} bytes as canonical JSON; admission keeps at most {MAX_PAYLOAD_BYTES} bytes"
    )
    return Refusal(
        REJECT_PAYLOAD_TOO_LARGE,
        (FieldProblem("payload", FieldRole.PAYLOAD, message),),
        f"the payload {message}: send less (large content belongs in a referenced store)",
    )


def future_refusal(workflow: WorkflowRevised, occurrence: Occurrence, now: int) -> Refusal | None:
    """``source_time_in_future`` when the source time is later than ``now + clock_uncertainty``."""
    latest = now + workflow.clock_uncertainty_ms
    if occurrence.source_time_ms <= latest:
        return None
    candle = workflow.validity_source_time == CANDLE_CLOSE
    field = CANDLE_OPEN_FIELD if candle else workflow.validity_source_time
    what = "the candle closes" if candle else "the source time is"
    message = (
        f"{what} at {format_time(occurrence.source_time_ms)}, later than now "
        f"({format_time(now)}) plus the clock uncertainty "
        f"{format_duration(workflow.clock_uncertainty_ms)}"
    )
    return Refusal(
        REJECT_SOURCE_TIME_IN_FUTURE,
        (FieldProblem(field, FieldRole.SOURCE_TIME, message),),
        f"{message}: a sender cannot extend its own validity; send the signal once its "
        "source time has passed, or correct the sender's clock",
    )


def check_delivery(workflow: WorkflowRevised, occurrence: Occurrence, now: int) -> Refusal | None:
    """What admission would reject a first delivery of ``occurrence`` for at ``now``, beyond
    its identity: a payload too large, a source time in the future. ``None`` if neither.

    The front doors call this with their own clock (and refuse early); the processor applies
    the same rules with its clock when it decides.
    """
    return payload_refusal(occurrence.payload_json) or future_refusal(workflow, occurrence, now)


def bad_delivery_id(delivery_id: str) -> str | None:
    """Why ``delivery_id`` cannot be kept (empty, too long, control characters), or ``None``."""
    if not delivery_id or len(delivery_id) > MAX_ID_CHARS:
        return f"delivery_id must be 1 to {MAX_ID_CHARS} characters"
    if not delivery_id.isprintable():
        return "delivery_id contains a control character"
    return None
