"""Workers report claims (``ReportBranch*`` commands); admission writes the facts (``Branch*``).

A claim and its fact carry the same fields, so accepting one is a copy; a record written to
``branch-results`` by a worker before 0.2.0 (the fact classes) is still read as a claim.
"""

from __future__ import annotations

import dataclasses
import json
import typing

import pytest

from schemas.codec import decode
from schemas.commands import (
    ReportBranchCompleted,
    ReportBranchFailed,
    ReportBranchSkipped,
    ReportBranchStarted,
)
from schemas.events import BranchCompleted, BranchFailed, BranchSkipped, BranchStarted
from schemas.files import AVRO_DIR, FIXTURES_DIR
from streams.apps.admission import branch_report
from streams.core.admission import RecordBranchReport, accepted, claim_of

CLAIMS = (ReportBranchStarted, ReportBranchCompleted, ReportBranchFailed, ReportBranchSkipped)
FACTS = (BranchStarted, BranchCompleted, BranchFailed, BranchSkipped)
PAIRS = [
    (ReportBranchStarted, BranchStarted),
    (ReportBranchCompleted, BranchCompleted),
    (ReportBranchFailed, BranchFailed),
    (ReportBranchSkipped, BranchSkipped),
]


@pytest.mark.parametrize(("claim", "fact"), PAIRS, ids=lambda c: c.__name__)
def test_a_claim_and_its_fact_have_the_same_fields_and_schemas(claim: type, fact: type) -> None:
    assert typing.get_type_hints(claim) == typing.get_type_hints(fact)
    assert [f.name for f in dataclasses.fields(claim)] == [f.name for f in dataclasses.fields(fact)]

    def fields_of(cls: type) -> list[object]:
        document = json.loads((AVRO_DIR / f"{cls.__name__}.avsc").read_text())
        return [(f["name"], f["type"]) for f in document["fields"]]

    assert fields_of(claim) == fields_of(fact)


@pytest.mark.parametrize(("claim", "fact"), PAIRS, ids=lambda c: c.__name__)
def test_a_released_claim_is_decided_and_accepted_as_its_fact(claim: type, fact: type) -> None:
    record = decode((FIXTURES_DIR / claim.__name__ / "v1.bin").read_bytes())
    assert type(record) is claim and isinstance(record, CLAIMS)
    command = branch_report(record)
    assert command == RecordBranchReport(record)
    assert command is not None
    facts = accepted(command.report)
    assert type(facts) is fact
    assert dataclasses.astuple(facts) == dataclasses.astuple(record)


@pytest.mark.parametrize(("claim", "fact"), PAIRS, ids=lambda c: c.__name__)
def test_a_report_written_before_0_2_0_is_read_as_the_claim_it_was(claim: type, fact: type) -> None:
    legacy = decode((FIXTURES_DIR / fact.__name__ / "v1.bin").read_bytes())
    assert type(legacy) is fact and isinstance(legacy, FACTS)
    command = branch_report(legacy)
    assert command is not None and type(command.report) is claim
    assert dataclasses.astuple(command.report) == dataclasses.astuple(legacy)
    assert claim_of(legacy) == command.report
    assert accepted(command.report) == legacy


def test_other_records_are_no_branch_report() -> None:
    assert branch_report(object()) is None
