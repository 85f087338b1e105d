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
from tests.support.core import CONTRACT_TOML, contract_document


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
        action_propose_slot="signal",
        action_approve_slots=("analysis",),
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
    document["workflow"][0]["auth"] = {}
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


@pytest.mark.parametrize(
    ("scope", "identity", "validity", "field"),
    [
        # The sequence: every generation would be a scope of its own.
        ({"fields": ["account", "candle_open"], "sequence": "candle_open"}, None, None, 1),
        # No sequence: the generation is the source time, here candle_open + interval.
        ({"fields": ["candle_open", "side"]}, None, None, 0),
        ({"fields": ["account", "signal_ts"]}, None, {"source_time": "signal_ts"}, 1),
        # The sender's event id: one occurrence, one scope.
        ({"fields": ["alert_id"], "sequence": "candle_open"}, {"event_id": "alert_id"}, None, 0),
    ],
)
def test_a_scope_field_that_changes_with_every_signal_is_refused(
    scope: dict[str, Any],
    identity: dict[str, Any] | None,
    validity: dict[str, Any] | None,
    field: int,
) -> None:
    document = edited(scope=scope)
    table = document["workflow"][0]
    if identity is not None:
        table["identity"] = identity
    if validity is not None:
        table["validity"] = {**table["validity"], **validity}
    problems = problems_of(document)
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"workflow[0].scope.fields[{field}]: "), problems
    assert "no signal could supersede another" in problems[0], problems


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


# --------------------------------------------------------------- a destination's identity


def revised_from(document: dict[str, Any], current: Any = None, now: int = 1) -> Any:
    [defn] = parse_workflow_file(document)
    return revise(current, defn, now)


def identity_edit(edit: str) -> dict[str, Any]:
    document = contract_document()
    table = document["workflow"][0]
    identity = table["identity"]
    if edit == "reorder derived":
        identity["derived"] = ["instrument", "venue", "interval", "candle_open", "rule"]
    elif edit == "drop a derived field":
        identity["derived"] = ["venue", "instrument", "interval", "candle_open"]
    elif edit == "remove event_id":
        del identity["event_id"]
    elif edit == "rename event_id":
        identity["event_id"] = "id"
    elif edit == "keep instrument case":
        identity["case_sensitive"] = ["instrument"]
    return document


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        ("reorder derived", "identity.derived"),
        ("drop a derived field", "identity.derived"),
        ("remove event_id", "identity.event_id"),
        ("rename event_id", "identity.event_id"),
        ("keep instrument case", "identity.case_sensitive"),
    ],
)
def test_revise_refuses_an_identity_change(edit: str, named: str) -> None:
    first = revised_from(contract_document())
    with pytest.raises(CoreError) as info:
        revised_from(identity_edit(edit), current=first, now=2)
    message = str(info.value)
    assert named in message
    assert "new subscription" in message
    assert getattr(info.value, "fields", None), "the error names the identity settings"


def test_adding_an_event_id_is_an_identity_change() -> None:
    document = contract_document()
    del document["workflow"][0]["identity"]["event_id"]
    first = revised_from(document)
    with pytest.raises(CoreError, match=r"identity\.event_id"):
        revised_from(contract_document(), current=first, now=2)


def test_a_source_time_change_that_rereads_a_derived_field_is_an_identity_change() -> None:
    # "signal_ts" is read as an instant only while it is the source-time field.
    document = contract_document()
    table = document["workflow"][0]
    table["identity"] = {"derived": ["instrument", "signal_ts"]}
    table["validity"]["source_time"] = "signal_ts"
    table["scope"]["sequence"] = "signal_ts"
    first = revised_from(document)
    table["validity"]["source_time"] = "signal_time"
    with pytest.raises(CoreError, match=r"signal_ts"):
        revised_from(document, current=first, now=2)


def test_changes_outside_the_identity_are_new_revisions() -> None:
    first = revised_from(contract_document())
    document = contract_document()
    table = document["workflow"][0]
    table["slots"] = ["analysis", "signal"]
    table["retention"] = "30d"
    table["validity"]["window"] = "9s"
    table["content"]["immutable"] = ["side"]
    second = revised_from(document, current=first, now=2)
    assert second is not None and second.revision == 2


def test_token_and_hmac_together_are_accepted() -> None:
    document = contract_document()
    document["workflow"][0]["auth"] = {"token_env": "TV_TOKEN", "hmac_secret_env": "HOOK_KEY"}
    [defn] = parse_workflow_file(document)
    assert (defn.auth_token_env, defn.auth_hmac_secret_env) == ("TV_TOKEN", "HOOK_KEY")


def test_branch_attempts_and_clock_uncertainty_reach_the_revision() -> None:
    document = contract_document()
    document["workflow"][0]["branch_attempts"] = 5
    document["workflow"][0]["validity"]["clock_uncertainty"] = "2s"
    revised = revised_from(document)
    assert revised.branch_attempts == 5
    assert revised.clock_uncertainty_ms == 2_000
    assert revised_from(contract_document()).clock_uncertainty_ms == 250


@pytest.mark.parametrize(
    ("where", "key", "value", "path"),
    [
        (None, "retention", "400d", "workflow[0].retention"),
        (None, "branch_timeout", "8d", "workflow[0].branch_timeout"),
        ("validity", "window", "400d", "workflow[0].validity.window"),
        ("validity", "clock_uncertainty", "2m", "workflow[0].validity.clock_uncertainty"),
        ("identity", "case_sensitive", ["price"], "workflow[0].identity.case_sensitive[0]"),
        (None, "slots", [f"s{i}" for i in range(17)], "workflow[0].slots"),
    ],
)
def test_bounded_settings(where: str | None, key: str, value: object, path: str) -> None:
    document = contract_document()
    table = document["workflow"][0]
    (table if where is None else table[where])[key] = value
    problems = problems_of(document)
    assert any(p.startswith(path + ":") and "at most" in p for p in problems), problems


def test_an_unchanged_file_keeps_its_digest_across_the_upgrade() -> None:
    # The contract example's digest as 0.1.0 computed it: re-applying the file after an
    # upgrade is "unchanged" while the settings added since keep their defaults.
    # (0.1.0's example had no [workflow.actions]).
    document = contract_document()
    del document["workflow"][0]["actions"]
    [defn] = parse_workflow_file(document)
    assert definition_digest(defn) == (
        "909943b17717d60407e42f9a68271eaaab11d54a6876909c853a18d54c430396"
    )
    changed = dataclasses.replace(defn, clock_uncertainty_ms=1_000)
    assert definition_digest(changed) != definition_digest(defn)


def test_actions_declare_the_proposing_and_approving_slots_and_the_exit_window() -> None:
    document = contract_document()
    document["workflow"][0]["actions"]["exit_window"] = "60s"
    [defn] = parse_workflow_file(document)
    assert defn.action_propose_slot == "signal"
    assert defn.action_approve_slots == ("analysis",)
    assert defn.action_exit_window_ms == 60_000
    revised = revise(None, defn, now=1)
    assert revised is not None
    assert revised.action_propose_slot == "signal"
    assert revised.action_approve_slots == ("analysis",)
    assert revised.action_exit_window_ms == 60_000


def test_a_workflow_without_actions_proposes_nothing() -> None:
    document = contract_document()
    del document["workflow"][0]["actions"]
    [defn] = parse_workflow_file(document)
    assert defn.action_propose_slot is None
    assert defn.action_approve_slots == ()
    assert defn.action_exit_window_ms is None


@pytest.mark.parametrize(
    ("actions", "expected"),
    [
        ({"approve": ["analysis"]}, ["workflow[0].actions.propose: is required"]),
        ({"propose": "nope"}, ['workflow[0].actions.propose: "nope" is not one of the slots']),
        (
            {"propose": "signal", "approve": ["signal"]},
            ['workflow[0].actions.approve[0]: "signal" is the proposing slot'],
        ),
        (
            {"propose": "signal", "approve": ["later"]},
            ['workflow[0].actions.approve[0]: "later" is not one of the slots'],
        ),
        (
            {"propose": "signal", "exit_window": "0s"},
            ['workflow[0].actions.exit_window: "0s" must be longer than 0'],
        ),
        (
            {"propose": "signal", "when": "now"},
            ["workflow[0].actions.when: unknown key"],
        ),
    ],
)
def test_bad_actions_are_listed_with_their_paths(
    actions: dict[str, Any], expected: list[str]
) -> None:
    problems = problems_of(edited(actions=actions))
    assert len(problems) == len(expected)
    for problem, start in zip(problems, expected, strict=True):
        assert problem.startswith(start), problem


def test_actions_need_a_decision_scope() -> None:
    problems = problems_of(edited(scope=None))
    assert len(problems) == 1
    assert problems[0].startswith("workflow[0].actions: needs a decision scope")
