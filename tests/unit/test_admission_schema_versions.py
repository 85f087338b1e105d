"""The admission events changed in 0.2.0: every released version still decodes, with the
documented defaults, and the new fields survive a round trip."""

from __future__ import annotations

import dataclasses

from schemas.codec import decode, encode
from schemas.events import RunAdmitted, WorkflowRevised
from schemas.files import FIXTURES_DIR
from streams.core.retention import periods, smallest_retention
from tests.support.core import T0, workflow

DAY = 86_400_000


def fixture(name: str, version: int) -> object:
    return decode((FIXTURES_DIR / name / f"v{version}.bin").read_bytes())


def test_older_run_admitted_records_decode_with_three_attempts_and_250ms() -> None:
    for version in (1, 2):
        record = fixture("RunAdmitted", version)
        assert isinstance(record, RunAdmitted)
        assert (record.branch_attempts, record.clock_uncertainty_ms) == (3, 250)
    current = fixture("RunAdmitted", 3)
    assert isinstance(current, RunAdmitted)
    assert current.branch_attempts != 3  # the v3 fixture carries its own value


def test_a_v1_workflow_revision_decodes_with_the_defaults_and_judges_by_its_retention() -> None:
    record = fixture("WorkflowRevised", 1)
    assert isinstance(record, WorkflowRevised)
    assert record.branch_attempts == 3
    assert record.clock_uncertainty_ms == 250
    assert record.identity_case_sensitive_fields == ()
    assert record.retention_history == ()
    assert periods(record) == ((record.applied_at_ms, record.retention_ms),)
    assert smallest_retention(record, 0, 10**12) == record.retention_ms


def test_the_new_fields_round_trip() -> None:
    wf = dataclasses.replace(
        workflow(),
        branch_attempts=7,
        clock_uncertainty_ms=1_500,
        identity_case_sensitive_fields=("instrument",),
        retention_history=(f"{T0 - DAY}:3600000", f"{T0}:{7 * DAY}"),
        retention_ms=7 * DAY,
    )
    assert decode(encode(wf)) == wf
    run = fixture("RunAdmitted", 3)
    assert isinstance(run, RunAdmitted)
    changed = dataclasses.replace(run, branch_attempts=9, clock_uncertainty_ms=0)
    assert decode(encode(changed)) == changed
