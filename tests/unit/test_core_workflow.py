"""Workflow file validation, digests and revisions (streams.core.workflow)."""

from __future__ import annotations

import copy
import dataclasses
import tomllib
from typing import Any

import pytest

from streams.core.errors import CoreError, WorkflowFileError
from streams.core.workflow import (
    DEFAULT_BRANCH_ATTEMPTS,
    DEFAULT_BRANCH_TIMEOUT_MS,
    DEFAULT_RETENTION_MS,
    WorkflowDefinition,
    definition_digest,
    parse_workflow_file,
    revise,
    workflow_key,
)
from tests.unit.test_core_support import CONTRACT_TOML, contract_document


def problems_of(document: dict[str, Any]) -> list[str]:
    with pytest.raises(WorkflowFileError) as info:
        parse_workflow_file(document)
    assert str(info.value).startswith("workflow file has")
    return info.value.problems


def edited(**changes: Any) -> dict[str, Any]:
    """The contract document with ``workflow[0]`` keys replaced (None deletes the key)."""
    document = contract_document()
    table = document["workflow"][0]
    for key, value in changes.items():
        if value is None:
            table.pop(key, None)
        else:
            table[key] = value
    return document


def test_contract_example_parses_to_the_documented_definition() -> None:
    [defn] = parse_workflow_file(tomllib.loads(CONTRACT_TOML))
    assert defn == WorkflowDefinition(
        subscription="btc-breakout",
        environment="paper",
        slots=("analysis", "signal", "journal"),
        branch_timeout_ms=30_000,
        branch_attempts=3,
        retention_ms=7 * 86_400_000,
        identity_event_id_field="event_id",
        identity_derived_fields=("venue", "instrument", "interval", "candle_open", "rule"),
        immutable_fields=("side", "rule", "price"),
        validity_source_time="candle_close",
        validity_window_ms=5_000,
        scope_fields=("account", "instrument", "side"),
        scope_sequence_field="candle_open",
        auth_token_env="BTC_BREAKOUT_TOKEN",
        auth_hmac_secret_env=None,
    )


def test_minimal_workflow_gets_documented_defaults() -> None:
    document = {
        "workflow": [
            {
                "subscription": "s",
                "environment": "live",
                "slots": ["a"],
                "identity": {"event_id": "id"},
                "validity": {"source_time": "time", "window": "1m"},
            }
        ]
    }
    [defn] = parse_workflow_file(document)
    assert defn.branch_timeout_ms == DEFAULT_BRANCH_TIMEOUT_MS
    assert defn.branch_attempts == DEFAULT_BRANCH_ATTEMPTS
    assert defn.retention_ms == DEFAULT_RETENTION_MS
    assert defn.identity_derived_fields == ()
    assert defn.immutable_fields == ()
    assert defn.scope_fields == ()
    assert defn.scope_sequence_field is None
    assert defn.auth_token_env is None
    assert defn.auth_hmac_secret_env is None


def test_bad_window_problem_names_its_path() -> None:
    document = contract_document()
    document["workflow"][0]["validity"]["window"] = "5x"
    assert problems_of(document) == [
        'workflow[0].validity.window: "5x" is not a duration (use 250ms, 5s, 2m, 1h, 7d)'
    ]


def test_all_problems_are_collected_not_just_the_first() -> None:
    document = edited(
        subscription="a/b",
        environment="prod",
        slots=["x", "x"],
        branch_timeout="soon",
        retention="0s",
        branch_attempts=0,
    )
    document["workflow"][0]["identity"] = {}
    document["workflow"][0]["validity"]["window"] = "5x"
    document["workflow"][0]["auth"] = {"token_env": "A", "hmac_secret_env": "B"}
    problems = problems_of(document)
    paths = [p.split(":", 1)[0] for p in problems]
    assert paths == [
        "workflow[0].subscription",
        "workflow[0].environment",
        "workflow[0].slots[1]",
        "workflow[0].branch_timeout",
        "workflow[0].retention",
        "workflow[0].branch_attempts",
        "workflow[0].identity",
        "workflow[0].validity.window",
        "workflow[0].auth",
    ]


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"slots": []}, "workflow[0].slots: must list at least one slot name"),
        ({"slots": None}, "workflow[0].slots: is required"),
        ({"slots": "analysis"}, "workflow[0].slots: must be a list"),
        ({"slots": ["ok", ""]}, 'workflow[0].slots[1]: "" is not a valid slot name'),
        ({"environment": None}, "workflow[0].environment: null is not one of paper, live"),
        ({"identity": None}, "workflow[0].identity: is required"),
        ({"validity": None}, "workflow[0].validity: is required"),
        ({"branch_attempts": True}, "workflow[0].branch_attempts: true is not a whole number"),
        ({"branch_attempts": 101}, "workflow[0].branch_attempts: 101 is not a whole number"),
        ({"colour": "red"}, "workflow[0].colour: unknown key"),
        ({"scope": "acc"}, 'workflow[0].scope: must be a table ([scope]), got "acc"'),
    ],
)
def test_single_problems(changes: dict[str, Any], expected: str) -> None:
    problems = problems_of(edited(**changes))
    assert any(p.startswith(expected) for p in problems), problems


def test_identity_needs_a_route() -> None:
    document = contract_document()
    document["workflow"][0]["identity"] = {"derived": []}
    [problem] = problems_of(document)
    assert problem.startswith("workflow[0].identity: needs an identity route")


def test_event_id_alone_or_derived_alone_is_a_route() -> None:
    for identity in ({"event_id": "event_id"}, {"derived": ["venue"]}):
        document = contract_document()
        document["workflow"][0]["identity"] = identity
        [defn] = parse_workflow_file(document)
        assert (defn.identity_event_id_field is not None) or defn.identity_derived_fields


def test_duplicate_field_and_unknown_table_key() -> None:
    document = contract_document()
    document["workflow"][0]["identity"]["derived"] = ["venue", "venue"]
    document["workflow"][0]["content"]["immutables"] = ["side"]
    problems = problems_of(document)
    assert 'workflow[0].identity.derived[1]: "venue" is listed twice' in problems
    assert any(p.startswith("workflow[0].content.immutables: unknown key") for p in problems)


def test_scope_sequence_and_auth_checks() -> None:
    document = contract_document()
    document["workflow"][0]["scope"] = {"sequence": "candle_open"}
    document["workflow"][0]["auth"] = {"token_env": "has space"}
    problems = problems_of(document)
    assert any(p.startswith("workflow[0].scope.fields: is required") for p in problems)
    assert any(p.startswith("workflow[0].auth.token_env:") for p in problems)


def test_duplicate_destination_in_one_file() -> None:
    document = contract_document()
    document["workflow"].append(copy.deepcopy(document["workflow"][0]))
    third = copy.deepcopy(document["workflow"][0])
    third["environment"] = "live"
    document["workflow"].append(third)
    assert problems_of(document) == [
        "workflow[1]: duplicate destination btc-breakout/paper (also workflow[0])"
    ]


def test_paper_and_live_are_separate_destinations() -> None:
    document = contract_document()
    live = copy.deepcopy(document["workflow"][0])
    live["environment"] = "live"
    document["workflow"].append(live)
    paper, live_defn = parse_workflow_file(document)
    assert (paper.environment, live_defn.environment) == ("paper", "live")


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ({}, "workflow: no [[workflow]] tables in the file"),
        ({"workflow": []}, "workflow: no [[workflow]] tables in the file"),
        ({"workflow": {"a": 1}}, "workflow: must be an array of tables"),
        ({"workflow": [], "extra": 1}, "extra: unknown top-level key"),
    ],
)
def test_file_shape_problems(document: dict[str, Any], expected: str) -> None:
    assert any(p.startswith(expected) for p in problems_of(document))


def test_error_is_a_core_error() -> None:
    with pytest.raises(CoreError):
        parse_workflow_file({})


def test_digest_ignores_layout_and_tracks_content() -> None:
    [a] = parse_workflow_file(contract_document())
    reordered = tomllib.loads(CONTRACT_TOML.replace('retention    = "7d"', 'retention = "168h"'))
    [b] = parse_workflow_file(reordered)
    assert definition_digest(a) == definition_digest(b)
    assert len(definition_digest(a)) == 64
    changed = dataclasses.replace(a, validity_window_ms=6_000)
    assert definition_digest(changed) != definition_digest(a)


def test_revise_numbers_revisions_and_skips_unchanged() -> None:
    [defn] = parse_workflow_file(contract_document())
    first = revise(None, defn, now=100)
    assert first is not None
    assert first.revision == 1
    assert first.applied_at_ms == 100
    assert first.definition_digest == definition_digest(defn)
    assert first.slots == defn.slots
    assert revise(first, defn, now=200) is None
    second = revise(first, dataclasses.replace(defn, slots=("analysis", "signal")), now=300)
    assert second is not None
    assert (second.revision, second.applied_at_ms) == (2, 300)


def test_revise_refuses_another_destination() -> None:
    [defn] = parse_workflow_file(contract_document())
    first = revise(None, defn, now=1)
    assert first is not None
    with pytest.raises(CoreError):
        revise(first, dataclasses.replace(defn, environment="live"), now=2)


def test_workflow_key() -> None:
    assert workflow_key("btc-breakout", "paper") == "btc-breakout/paper"
