"""A CloudEvents workflow: the file, the identity (source + id), intake and admission."""

from __future__ import annotations

import tomllib
from typing import Any

import orjson
import pytest

from schemas.commands import AdmitDelivery
from schemas.events import DeliveryDeduplicated, OccurrenceConflict, RunAdmitted
from streams.core.admission import Admit
from streams.core.cloudevents import CloudEvent, read_event
from streams.core.errors import IdentityChanged, Refusal, WorkflowFileError
from streams.core.intake import intake
from streams.core.workflow import parse_workflow_file, revise
from tests.support.core import MINUTE, T0, Processor, candle
from tests.support.core import workflow as contract_workflow

CE_TOML = """
[[workflow]]
subscription = "signals"
environment  = "paper"
slots        = ["analysis", "signal", "journal"]

[workflow.identity]
envelope = "cloudevents"

[workflow.content]
immutable = ["data.side", "data.price", "type"]

[workflow.validity]
source_time = "time"
window      = "5s"

[workflow.scope]
fields = ["data.account", "data.instrument"]
"""
NOW = T0 + MINUTE
EVENT: dict[str, object] = {
    "specversion": "1.0",
    "id": "evt-1",
    "source": "https://signals.example/alerts",
    "type": "com.example.signal.fired",
    "time": "2026-11-30T12:00:30Z",
    "data": {"instrument": "btcusdt", "side": "buy", "price": "97000.50", "account": "acc-1"},
}


def document(**identity: object) -> dict[str, Any]:
    parsed = tomllib.loads(CE_TOML)
    parsed["workflow"][0]["identity"].update(identity)
    return parsed


def revised(doc: dict[str, Any] | None = None) -> Any:
    [definition] = parse_workflow_file(doc or document())
    result = revise(None, definition, T0 - 86_400_000)
    assert result is not None
    return result


WORKFLOW = revised()


def event(**changes: object) -> CloudEvent:
    checked = read_event({**EVENT, **changes})
    assert isinstance(checked, CloudEvent), checked
    return checked


def take(payload: Any, wf: Any = WORKFLOW, delivery_id: str = "d-1") -> AdmitDelivery | Refusal:
    return intake(
        payload, wf, delivery_id=delivery_id, received_at_ms=NOW, channel="http", now_ms=NOW
    )


def test_the_file_opts_in_and_the_revision_carries_it() -> None:
    assert WORKFLOW.identity_envelope == "cloudevents"
    assert (WORKFLOW.identity_event_id_field, WORKFLOW.identity_derived_fields) == (None, ())
    assert WORKFLOW.validity_source_time == "time"


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        ({"identity": {"envelope": "cloudevents", "event_id": "id"}}, "remove event_id"),
        ({"identity": {"envelope": "cloudevents", "derived": ["x"]}}, "remove derived"),
        ({"identity": {"envelope": "json"}}, 'is not "cloudevents"'),
        ({"validity": {"source_time": "candle_close", "window": "5s"}}, "candle_close"),
        ({"validity": {"source_time": "data", "window": "5s"}}, "source_time"),
        ({"content": {"immutable": ["limit_price"]}}, "content.immutable[0]"),
        ({"content": {"immutable": ["Data.side"]}}, "content.immutable[0]"),
        ({"scope": {"fields": ["data.a.b"]}}, "scope.fields[0]"),
    ],
)
def test_file_problems_of_a_cloudevents_workflow(edit: dict[str, Any], expected: str) -> None:
    doc = document()
    doc["workflow"][0].update(edit)
    with pytest.raises(WorkflowFileError) as info:
        parse_workflow_file(doc)
    assert any(expected in p for p in info.value.problems), info.value.problems


def test_opting_in_or_out_is_an_identity_change() -> None:
    [plain] = parse_workflow_file(
        tomllib.loads(CE_TOML.replace('envelope = "cloudevents"', 'event_id = "id"'))
    )
    with pytest.raises(IdentityChanged) as out:
        revise(WORKFLOW, plain, T0)
    assert "identity.envelope" in out.value.fields
    [cloudevents] = parse_workflow_file(document())
    with pytest.raises(IdentityChanged) as into:
        revise(contract_workflow(subscription="signals"), cloudevents, T0)
    assert "identity.envelope" in into.value.fields


def test_identity_is_source_plus_id_and_fields_are_attributes_or_data_members() -> None:
    taken = take(event(token="secret"))
    assert isinstance(taken, AdmitDelivery)
    assert taken.admission_key == "signals/paper/https%3A%2F%2Fsignals.example%2Falerts/e:evt-1"
    assert (taken.source, taken.event_id) == ("https://signals.example/alerts", "evt-1")
    payload = orjson.loads(taken.payload_json)
    assert "token" not in payload  # the credential never reaches Kafka
    assert payload["data"] == EVENT["data"]  # the event's JSON format, as sent
    # The same id with another source is another occurrence; other data keeps the key.
    other = take(event(source="urn:other"))
    assert isinstance(other, AdmitDelivery) and other.admission_key != taken.admission_key
    same = take(event(data={**EVENT["data"], "side": "sell"}))  # type: ignore[dict-item]
    assert isinstance(same, AdmitDelivery) and same.admission_key == taken.admission_key


def test_source_time_from_time_or_a_data_field() -> None:
    missing_time = take(event(time=None))
    assert isinstance(missing_time, Refusal)
    assert [(p.field, p.role.value) for p in missing_time.problems] == [("time", "source_time")]
    future = take(event(time="2026-11-30T12:05:00Z"))
    assert isinstance(future, Refusal) and future.reason == "source_time_in_future"
    doc = document()
    doc["workflow"][0]["validity"]["source_time"] = "data.fired_at"
    from_data = revised(doc)
    no_field = take(event(), from_data)
    assert isinstance(no_field, Refusal)
    assert [p.field for p in no_field.problems] == ["data.fired_at"]
    taken = take(event(data={**EVENT["data"], "fired_at": T0}, time=None), from_data)  # type: ignore[dict-item]
    assert isinstance(taken, AdmitDelivery)


def test_the_envelope_must_match_the_workflow() -> None:
    plain = take(candle())
    assert isinstance(plain, Refusal) and plain.reason == "cloudevent_required"
    as_event = take(event(), contract_workflow())
    assert isinstance(as_event, Refusal) and as_event.reason == "cloudevents_not_enabled"
    assert [p.field for p in as_event.problems] == ["specversion"]


def test_admission_dedupes_copies_and_conflicts_on_changed_immutable_data() -> None:
    proc = Processor()

    def admit(checked: CloudEvent, delivery_id: str) -> list[Any]:
        taken = take(checked, delivery_id=delivery_id)
        assert isinstance(taken, AdmitDelivery)
        return proc.handle(Admit(taken, WORKFLOW), NOW)

    first = admit(event(), "d-1")
    assert isinstance(first[0], RunAdmitted) and len(first) == 4
    assert first[0].expires_at_ms == T0 + 30_000 + 5_000
    # The same event again, with spellings canonical reading makes equal and an attribute
    # the workflow does not read: a copy.
    respelled = event(
        data={"instrument": "BTCUSDT", "side": "buy", "price": 97000.5, "account": "acc-1"},
        comexamplehop="2",
    )
    [copy] = admit(respelled, "d-2")
    assert isinstance(copy, DeliveryDeduplicated) and copy.run_id == first[0].run_id
    [conflict] = admit(event(data={**EVENT["data"], "side": "sell"}), "d-3")  # type: ignore[dict-item]
    assert isinstance(conflict, OccurrenceConflict)
    assert conflict.differing_fields == ("data.side",)
    [changed_type] = admit(event(type="com.example.other"), "d-4")
    assert isinstance(changed_type, OccurrenceConflict)
    assert changed_type.differing_fields == ("type",)
