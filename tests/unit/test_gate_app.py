"""The gate app's routing (streams.apps.gate): where each of the core's events goes."""

from __future__ import annotations

from schemas.events import CandidateRejected, DispatchWithdrawn
from streams.apps.gate import GateApp
from streams.core.gate import ProposeCandidate, RequestDispatch, WithdrawDispatch
from streams.engine.app import Route
from tests.support.gate import SCOPE, T0, Gate, proposal, request
from tests.support.kafka import unique_settings


def test_dispatches_go_to_actions_by_run_id_decisions_to_gate_decisions_by_scope() -> None:
    settings = unique_settings()
    app = GateApp(settings)
    assert app.input_topics == (settings.topic_named("candidates"),)
    assert app.changelog_topic == settings.topic_named("gate-changelog")
    gate = Gate()
    p = proposal(1)
    early = request(proposal(2, scope_key=SCOPE + "|x"), T0 + 10)
    [accepted] = gate.propose(p, T0 + 10)
    [dispatched] = gate.request(request(p, T0 + 20), T0 + 20)
    [held] = gate.request(early, T0 + 30)  # its proposal has not arrived: held in the state
    assert app.route(accepted) == Route(settings.topic_named("gate-decisions"), SCOPE)
    assert app.route(dispatched) == Route(settings.topic_named("actions"), p.run_id)
    assert app.route(held) is None
    assert isinstance(app.to_command(p), ProposeCandidate)
    assert isinstance(app.to_command(early), RequestDispatch)
    withdrawn = DispatchWithdrawn(
        p.candidate_id, p.run_id, p.admission_key, SCOPE, "entry", "analysis", "x", "y", T0
    )
    assert isinstance(app.to_command(withdrawn), WithdrawDispatch)
    assert app.to_command(object()) is None


def test_a_proposal_that_cannot_be_recorded_is_answered_rejected() -> None:
    app = GateApp(unique_settings())
    [answer] = app.undecidable(proposal(3), "MSG_SIZE_TOO_LARGE", T0)
    assert isinstance(answer, CandidateRejected)
    assert answer.reason == "cannot_be_recorded" and "MSG_SIZE_TOO_LARGE" in answer.detail
    assert app.undecidable(request(proposal(3), T0), "MSG_SIZE_TOO_LARGE", T0) == []
