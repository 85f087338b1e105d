"""Every package's deliberate errors reach the operator as one line on stderr, exit code 1.

Their messages say what to do; a traceback would bury that. The core's errors used to escape
the CLI as tracebacks (its root was not among the ones the CLI looked up).
"""

from __future__ import annotations

import argparse

import pytest

from consumers.errors import ConsumersError
from projections.errors import ProjectionError
from schemas.errors import SchemaError
from sluicegate import cli
from sluicegate.commands import stats
from sluicegate.errors import SluicegateError
from streams.core.errors import InconsistentHistory
from streams.errors import KafkaUnavailable
from streams.settings import SettingsError


@pytest.mark.parametrize(
    "error",
    [
        InconsistentHistory("run-1 was never admitted; inspect its events"),
        SchemaError("unknown fingerprint; upgrade this consumer"),
        KafkaUnavailable("Kafka did not answer; is it up?"),
        SettingsError("SLUICEGATE_KAFKA='x' is not HOST:PORT"),
        ProjectionError("no projection; start `sluicegate projector`"),
        ConsumersError("branch reports not acknowledged; tasks will repeat"),
        SluicegateError("cannot read f.toml"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_a_product_error_is_one_line_and_exit_code_1(
    error: Exception, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def failing(_args: argparse.Namespace) -> int:
        raise error

    monkeypatch.setattr(stats, "cmd_stats", failing)
    assert cli.main(["stats"]) == 1
    assert capsys.readouterr().err == f"sluicegate stats: {error}\n"


def test_any_other_exception_is_a_fault_with_its_traceback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def failing(_args: argparse.Namespace) -> int:
        raise RuntimeError("a bug")

    monkeypatch.setattr(stats, "cmd_stats", failing)
    with pytest.raises(RuntimeError, match="a bug"):
        cli.main(["stats"])
