"""The gate's records: each one the gate writes survives the wire codec and JSON unchanged.

``test_schemas_roundtrip`` covers them with generated values; here every gate event is built
by the gate itself, so a field ``decide`` fills with something its schema cannot carry
(a ``None`` in a required field, a list for an array) fails loudly.
"""

from __future__ import annotations

import dataclasses

import orjson
import pytest

from schemas import decode, encode, from_json_dict, record_name, to_json_dict
from schemas.events import (
    ActionDispatched,
    CandidateAccepted,
    CandidateExpired,
    CandidateProposed,
    CandidateRejected,
    CandidateSuperseded,
    DispatchRequested,
)
from schemas.registry import get_registry
from streams.core.gate import GateEvent
from tests.support.gate import T0, Gate, proposal, request

GATE_RECORDS = (
    CandidateProposed,
    DispatchRequested,
    CandidateAccepted,
    CandidateSuperseded,
    CandidateExpired,
    CandidateRejected,
    ActionDispatched,
)
OWN_TIME = {
    CandidateProposed: "proposed_at_ms",
    DispatchRequested: "requested_at_ms",
    CandidateAccepted: "accepted_at_ms",
    CandidateSuperseded: "decided_at_ms",
    CandidateExpired: "decided_at_ms",
    CandidateRejected: "decided_at_ms",
    ActionDispatched: "dispatched_at_ms",
}


def one_of_each() -> dict[type, GateEvent | CandidateProposed]:
    gate = Gate()
    at = T0 + 1_000
    entry = proposal(5, dequeued_at_ms=None)
    gate.propose(entry, at)
    gate.propose(proposal(4), at)
    gate.request(request(entry, at), at)
    gate.propose(proposal(1, kind="exit"), at)
    gate.propose(proposal(2, kind="exit", notional="250", quantity=None), at)
    gate.propose(proposal(6, side="long"), at)
    gate.propose(proposal(7), T0 + 9_000)
    gate.request(request(proposal(8), at), at)
    found: dict[type, GateEvent | CandidateProposed] = {CandidateProposed: entry}
    for event in gate.events:
        found.setdefault(type(event), event)
    assert set(found) == set(GATE_RECORDS)
    return found


EXAMPLES = one_of_each()


@pytest.mark.parametrize("cls", GATE_RECORDS, ids=lambda c: c.__name__)
def test_gate_record_round_trips(cls: type) -> None:
    record = EXAMPLES[cls]
    message = encode(record)
    assert message[2:10] == get_registry().by_class[cls].fingerprint
    assert decode(message) == record
    assert record_name(message) == cls.__name__
    through_json = orjson.loads(orjson.dumps(to_json_dict(record)))
    assert from_json_dict(cls.__name__, through_json) == record


@pytest.mark.parametrize("cls", GATE_RECORDS, ids=lambda c: c.__name__)
def test_every_gate_record_carries_ids_deadline_copy_and_times(cls: type) -> None:
    fields = [f.name for f in dataclasses.fields(cls)]
    for name in (
        "run_id",
        "admission_key",
        "scope_key",
        "kind",
        "expires_at_ms",
        "source_time_ms",
        "validity_source_time",
        "validity_window_ms",
        "clock_uncertainty_ms",
        "workflow_revision",
    ):
        assert name in fields, name
    # Projections take a record's own time from its last *_at_ms field.
    assert [n for n in fields if n.endswith("_at_ms")][-1] == OWN_TIME[cls]
    if cls is not DispatchRequested:
        assert {"generation", "generation_kind", "enqueued_at_ms", "dequeued_at_ms"} <= set(fields)
