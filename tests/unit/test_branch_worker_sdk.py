"""The SDK's pure parts: the time left, a proposal as the slot result admission reads, and
the largest result a branch reports."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import orjson

from consumers.branch_worker import Proposal, Task, demo_handler, finish_task
from schemas.commands import ReportBranchCompleted, ReportBranchFailed
from schemas.events import BranchCompleted
from streams.core.admission.actions import propose
from streams.core.limits import MAX_RESULT_BYTES
from tests.support.core import MINUTE, T0


def task(**changes: object) -> Task:
    base: dict[str, object] = {
        "run_id": "run-1",
        "admission_key": "k",
        "slot": "signal",
        "attempt": 1,
        "workflow_revision": 1,
        "expires_at_ms": 10_000,
        "payload": {"side": "sell", "rule": "r"},
        "clock_uncertainty_ms": 250,
        "action_role": "propose",
    }
    base.update(changes)
    return Task(**base)  # type: ignore[arg-type]


def test_remaining_counts_the_run_clock_uncertainty_and_equality_fails() -> None:
    t = task()
    assert t.remaining(9_749) == 1  # still eligible: 9 749 + 250 < 10 000
    assert t.remaining(9_750) == 0  # no longer: equality fails
    assert task(clock_uncertainty_ms=None).remaining(9_999) == 1


def test_a_proposal_becomes_the_result_admission_proposes() -> None:
    proposal = Proposal(
        kind="entry",
        side="buy",
        quantity="0.010",
        limit_price="97000.5",
        params={"rule": "breakout-v1"},
        protection={"kind": "stop_loss", "stop_price": "96000"},
        reassessment_of="run-0.entry",
        result={"note": "kept"},
    )
    result = proposal.as_result()
    assert result["note"] == "kept"
    assert result["proposal"] == {
        "kind": "entry",
        "side": "buy",
        "quantity": "0.010",
        "limit_price": "97000.5",
        "params": {"rule": "breakout-v1"},
        "protection": {"kind": "stop_loss", "stop_price": "96000"},
        "reassessment_of": "run-0.entry",
    }
    # What admission makes of it (the README's run, its proposing slot completed).
    from tests.support.core import workflow
    from tests.support.pipeline import Pipeline

    pipe = Pipeline(workflow())
    run = pipe.admit(
        {
            "source": "tv",
            "venue": "binance",
            "instrument": "BTCUSDT",
            "interval": "1m",
            "candle_open": T0,
            "rule": "breakout-v1",
            "side": "buy",
            "price": "97000.5",
            "account": "acc-1",
        },
        "d-1",
        T0 + MINUTE,
    )
    state = pipe.admission.state(run.admission_key)
    assert state is not None
    text = orjson.dumps(result, option=orjson.OPT_SORT_KEYS).decode()
    done = BranchCompleted(run.run_id, run.admission_key, "signal", 1, "w", text, T0 + MINUTE)
    proposed = propose(state.original, "scope", done)
    assert proposed is not None
    assert (proposed.kind, proposed.quantity, proposed.reassessment_of) == (
        "entry",
        "0.010",
        "run-0.entry",
    )
    assert proposed.protection_json == '{"kind":"stop_loss","stop_price":"96000"}'


def test_the_demo_handler_proposes_from_the_proposing_slot_only() -> None:
    proposed = demo_handler(task())
    assert isinstance(proposed, Proposal)
    assert (proposed.kind, proposed.side, proposed.quantity) == ("entry", "sell", "0.01")
    assert not isinstance(demo_handler(task(slot="journal", action_role="record")), Proposal)


def test_a_result_over_the_limit_fails_its_branch_and_one_at_it_completes() -> None:
    # {"b":"..."} is 8 bytes of JSON around the string.
    def sized(total: int) -> object:
        return finish_task(task(), lambda _: {"b": "x" * (total - 8)}, worker="w", clock=lambda: 5)

    at_limit = sized(MAX_RESULT_BYTES)
    assert isinstance(at_limit, ReportBranchCompleted)
    assert len(at_limit.result_json.encode()) == MAX_RESULT_BYTES
    over = sized(MAX_RESULT_BYTES + 1)
    assert isinstance(over, ReportBranchFailed)
    assert (over.run_id, over.slot, over.worker, over.failed_at_ms) == ("run-1", "signal", "w", 5)
    assert f"{MAX_RESULT_BYTES + 1:,} bytes" in over.error


def test_a_result_that_is_not_json_fails_its_branch_instead_of_raising() -> None:
    results: list[tuple[dict[Any, object], str]] = [
        ({"price": Decimal("1.5")}, "Decimal"),
        ({1: "a"}, "key"),
    ]
    for result, why in results:

        def handler(_: Task, r: dict[Any, object] = result) -> dict[str, object]:
            return r

        failed = finish_task(task(), handler, worker="w", clock=lambda: 5)
        assert isinstance(failed, ReportBranchFailed)
        assert "not JSON" in failed.error and why in failed.error, failed.error
