"""What a workflow bounds and the admission core enforces: branch attempts, source times in
the future, payload sizes and reruns, and the size of an admission state.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from schemas.commands import ReportBranchCompleted
from schemas.events import (
    BranchFailed,
    BranchLaunched,
    BranchRelaunched,
    DeliveryRejected,
    RerunRejected,
    RunAdmitted,
    WorkflowRevised,
)
from streams.core.admission import EVICTION_MARGIN_MS, Admit, RecordBranchReport, Rerun, decide
from streams.core.canonical import canonical_json
from streams.core.durations import MAX_SOURCE_TIME_MS
from streams.core.identity import identify
from streams.core.limits import (
    MAX_BRANCH_TIMEOUT_MS,
    MAX_CLOCK_UNCERTAINTY_MS,
    MAX_FIELD_CHARS,
    MAX_FIELDS,
    MAX_PAYLOAD_BYTES,
    MAX_RERUNS,
    MAX_RETENTION_MS,
    MAX_SLOTS,
    MAX_STATE_BYTES,
    MAX_WINDOW_MS,
)
from streams.core.state_codec import encode_state
from streams.core.workflow import parse_workflow_file, revise
from tests.support.core import (
    MINUTE,
    T0,
    Processor,
    candle,
    contract_document,
    delivery,
    of_type,
    rerun_request,
)

HOUR = 60 * MINUTE
CLOSE_A = T0 + MINUTE
TIMEOUT = 30_000
KAFKA_MESSAGE_LIMIT = 1_048_588  # the broker's default message.max.bytes
"""The broker's default ``message.max.bytes``; no state record may come near it."""


def revised(current: WorkflowRevised | None = None, now: int = T0 - HOUR, **table: Any) -> Any:
    """The contract workflow with top-level or ``section__key`` changes, revised at ``now``."""
    document = contract_document()
    target = document["workflow"][0]
    for dotted, value in table.items():
        *parents, leaf = dotted.split("__")
        node = target
        for parent in parents:
            node = node[parent]
        node[leaf] = value
    [definition] = parse_workflow_file(document)
    return revise(current, definition, now)


def admit(
    proc: Processor, wf: WorkflowRevised, payload: dict[str, object], did: str, now: int
) -> list[Any]:
    return list(proc.handle(Admit(delivery(wf, payload, did, now), wf), now))


# --------------------------------------------------------------- branch attempts


def exhaust(proc: Processor, start: int) -> tuple[list[int], list[Any]]:
    """Fire timers until the journal slot fails; the attempts launched and the failure."""
    attempts: list[int] = [1]
    t = start
    for _ in range(20):
        t += TIMEOUT
        events = proc.timers(t)
        relaunched = of_type(events, BranchRelaunched)
        attempts += [e.attempt for e in relaunched if e.slot == "journal"]
        failed = of_type(events, BranchFailed)
        if failed:
            return attempts, failed
    return attempts, []


def finish_others(proc: Processor, events: list[Any], now: int) -> None:
    for launched in of_type(events, BranchLaunched):
        if launched.slot != "journal":
            done = ReportBranchCompleted(
                launched.run_id, launched.admission_key, launched.slot, 1, "w", "{}", now
            )
            proc.handle(RecordBranchReport(done), now)


def test_branch_attempts_from_the_workflow_are_honoured() -> None:
    proc = Processor()
    wf = revised(branch_attempts=5)
    events = admit(proc, wf, candle(), "a-1", CLOSE_A)
    finish_others(proc, events, CLOSE_A)
    attempts, [failed] = exhaust(proc, CLOSE_A)
    assert attempts == [1, 2, 3, 4, 5]
    assert failed.attempt == 5
    assert failed.error == "no result after 5 attempts"


def test_branch_attempts_are_frozen_per_run() -> None:
    proc = Processor(restart_every_step=True)
    first = revised(branch_attempts=5)
    events = admit(proc, first, candle(), "a-1", CLOSE_A)
    [admitted] = of_type(events, RunAdmitted)
    assert admitted.branch_attempts == 5
    finish_others(proc, events, CLOSE_A)
    # A redeploy lowers the limit; the run keeps the one it was admitted with.
    second = revised(first, now=CLOSE_A, branch_attempts=1)
    admit(proc, second, candle(), "a-2", CLOSE_A + 1)
    attempts, _ = exhaust(proc, CLOSE_A)
    assert attempts == [1, 2, 3, 4, 5]


def test_a_single_attempt_fails_at_the_first_timeout() -> None:
    proc = Processor()
    events = admit(proc, revised(branch_attempts=1), candle(), "a-1", CLOSE_A)
    finish_others(proc, events, CLOSE_A)
    attempts, [failed] = exhaust(proc, CLOSE_A)
    assert attempts == [1]
    assert failed.error == "no result after 1 attempts"


# --------------------------------------------------------------- source times


@pytest.mark.parametrize(
    ("open_time", "now"),
    [
        ("2026-11-30T13:00:00Z", CLOSE_A),  # the candle closes an hour from now
        ("2030-01-01T00:00:00Z", CLOSE_A),  # years from now
        ("2026-11-30T12:00:00Z", CLOSE_A - 251),  # just beyond the default 250 ms
    ],
)
def test_a_source_time_in_the_future_is_rejected(open_time: str, now: int) -> None:
    proc = Processor()
    events = admit(proc, revised(), candle(open_time), "f-1", now)
    assert [type(e) for e in events] == [DeliveryRejected], events
    assert events[0].reason == "source_time_in_future"
    assert "250ms" in events[0].detail
    assert proc.states == {}


def test_a_source_time_within_the_clock_uncertainty_is_admitted() -> None:
    events = admit(Processor(), revised(), candle(), "f-1", CLOSE_A - 250)
    assert isinstance(events[0], RunAdmitted)
    assert events[0].clock_uncertainty_ms == 250
    wide = revised(validity__clock_uncertainty="2s")
    events = admit(Processor(), wide, candle(), "f-2", CLOSE_A - 2_000)
    assert isinstance(events[0], RunAdmitted)
    assert events[0].clock_uncertainty_ms == 2_000
    [late] = admit(Processor(), wide, candle(), "f-3", CLOSE_A - 2_001)
    assert isinstance(late, DeliveryRejected) and late.reason == "source_time_in_future"


@pytest.mark.parametrize("open_time", ["1999-12-31T23:00:00Z", "2300-01-01T00:00:00Z", 0])
def test_source_times_outside_the_supported_range_are_invalid(open_time: object) -> None:
    wf = revised()
    [event] = decide(None, Admit(delivery(wf, candle(open_time), "r-1", CLOSE_A), wf), CLOSE_A)
    assert isinstance(event, DeliveryRejected)
    assert event.reason == "invalid_field"
    assert "candle_open" in event.detail


def test_no_due_time_can_pass_the_engine_timer_keys() -> None:
    latest_now = MAX_SOURCE_TIME_MS + MAX_RETENTION_MS + MAX_CLOCK_UNCERTAINTY_MS
    assert MAX_SOURCE_TIME_MS + MAX_RETENTION_MS + EVICTION_MARGIN_MS < 10**13
    assert latest_now + MAX_BRANCH_TIMEOUT_MS < 10**13
    assert MAX_SOURCE_TIME_MS + MAX_WINDOW_MS < 10**13


# --------------------------------------------------------------- payloads, reruns, state


def big_candle(size: int) -> dict[str, object]:
    payload = candle()
    payload["note"] = "x" * (size - len(canonical_json(payload)) - len(',"note":""'))
    assert len(canonical_json(payload)) == size
    return payload


def test_an_oversized_payload_is_rejected() -> None:
    wf = revised()
    proc = Processor()
    events = admit(proc, wf, big_candle(MAX_PAYLOAD_BYTES), "p-1", CLOSE_A)
    assert isinstance(events[0], RunAdmitted)
    [event] = admit(proc, wf, big_candle(MAX_PAYLOAD_BYTES + 1), "p-2", CLOSE_A)
    assert isinstance(event, DeliveryRejected)
    assert event.reason == "payload_too_large"
    assert str(MAX_PAYLOAD_BYTES) in event.detail


def test_reruns_are_limited_per_occurrence() -> None:
    proc = Processor()
    wf = revised()
    [admitted, *_] = admit(proc, wf, candle(), "a-1", CLOSE_A)
    key = admitted.admission_key
    for i in range(MAX_RERUNS):
        events = proc.handle(Rerun(rerun_request(key, admitted.run_id, f"rr-{i}"), wf), CLOSE_A)
        assert isinstance(events[0], RunAdmitted), events
    [refused] = proc.handle(Rerun(rerun_request(key, admitted.run_id, "rr-x"), wf), CLOSE_A)
    assert refused == RerunRejected("rr-x", key, admitted.run_id, "rerun_limit", CLOSE_A)


def test_a_rerun_request_with_an_overlong_reason_is_refused() -> None:
    proc = Processor()
    wf = revised()
    [admitted, *_] = admit(proc, wf, candle(), "a-1", CLOSE_A)
    request = rerun_request(admitted.admission_key, admitted.run_id, reason="why " * 1_000)
    [refused] = proc.handle(Rerun(request, wf), CLOSE_A)
    assert isinstance(refused, RerunRejected) and refused.reason == "invalid_request"


def test_the_largest_admission_state_fits_a_kafka_message() -> None:
    """Largest payload, longest accepted fields and ids, most slots, every rerun allowed."""
    fields = [f"f{i:02d}" + "_" * 120 for i in range(MAX_FIELDS)]
    slots = [f"slot{i:02d}" + "-" * 120 for i in range(MAX_SLOTS)]
    wf = revised(
        slots=slots,
        identity={"derived": fields},
        # The sequence is never a scope field (it differs with every signal): one more field.
        scope={"fields": fields, "sequence": "sequence"},
        content={"immutable": fields},
        validity={"source_time": "signal_time", "window": "5s"},
        actions={"propose": slots[0], "approve": slots[1:], "exit_window": "5s"},
    )
    # "|" is percent-encoded in keys: the longest admission and scope keys it can make.
    payload: dict[str, object] = {name: "|" * MAX_FIELD_CHARS for name in fields}
    payload.update(
        source="s" * MAX_FIELD_CHARS, signal_time=CLOSE_A, sequence="|" * MAX_FIELD_CHARS
    )
    # A quote is two bytes in the payload's JSON and four once that JSON sits in the state.
    payload["note"] = '"' * ((MAX_PAYLOAD_BYTES - len(canonical_json(payload).encode()) - 12) // 2)
    assert MAX_PAYLOAD_BYTES - 16 < len(canonical_json(payload).encode()) <= MAX_PAYLOAD_BYTES
    occurrence = identify(wf, payload)
    proc = Processor(restart_every_step=True)
    d = dataclasses.replace(
        delivery(wf, payload, "d" * 128, CLOSE_A), admission_key=occurrence.admission_key
    )
    [admitted, *_] = proc.handle(Admit(d, wf), CLOSE_A)
    assert isinstance(admitted, RunAdmitted), admitted
    reason = "\x00" * 1_000  # six bytes each in JSON
    for i in range(MAX_RERUNS + 5):
        request = dataclasses.replace(
            rerun_request(admitted.admission_key, admitted.run_id, f"{i:03d}" + "q" * 125),
            reason=reason,
        )
        proc.handle(Rerun(request, wf), CLOSE_A + i)
    state = proc.state(admitted.admission_key)
    assert state is not None and len(state.runs) == MAX_RERUNS + 1
    size = len(encode_state(state)) + len(admitted.admission_key.encode()) + 2
    assert size <= MAX_STATE_BYTES < KAFKA_MESSAGE_LIMIT, size


def test_many_reruns_of_a_large_payload_stay_small() -> None:
    """The payload is stored once per occurrence, not once per rerun."""
    proc = Processor()
    wf = revised()
    payload = big_candle(60_000)
    [admitted, *_] = admit(proc, wf, payload, "a-1", CLOSE_A)
    for i in range(20):
        proc.handle(Rerun(rerun_request(admitted.admission_key, admitted.run_id, f"r{i}"), wf), i)
    state = proc.state(admitted.admission_key)
    assert state is not None
    assert len(encode_state(state)) < 2 * 60_000
    # The reruns still carry (and launch with) the original payload.
    assert {run.payload_json for run in state.runs} == {state.original.payload_json}
