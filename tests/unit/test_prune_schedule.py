"""The projector's prune schedule: one interval before the first prune, a failure waits for
the next one and never ends the schedule, only share 0 prunes. No PostgreSQL or Kafka: the
prune itself is replaced."""

from __future__ import annotations

import argparse
import threading

import pytest

from projections.prune import PruneReport
from projections.prune_schedule import PruneSchedule
from projections.share import Share
from sluicegate.commands.prune import add_prune_every_option, prune_schedule
from streams.settings import Settings, load_settings


class FakePrune:
    def __init__(self, *outcomes: PruneReport | Exception) -> None:
        self.outcomes = list(outcomes)
        self.calls = 0

    def __call__(self, settings: Settings, stop: threading.Event, keep_ms: int) -> PruneReport:
        self.calls += 1
        self.keep_ms = keep_ms
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


def _report(pruned: int) -> PruneReport:
    report = PruneReport("sg_x", dry_run=False, examined=pruned, pruned=pruned, runs=pruned)
    report.rows["event_log"] = 10 * pruned
    return report


def test_a_failure_is_reported_and_the_next_prune_still_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    run = FakePrune(OSError("no route to host\nsecond line"), OSError("again"), _report(3))
    schedule = PruneSchedule(
        load_settings({}), 60, keep_ms=86_400_000, run=run, clock=lambda: 1_000.0
    )
    assert schedule.run_once() is None
    assert schedule.run_once() is None
    assert schedule.details() == {
        "every_seconds": 60,
        "keep_seconds": 86_400.0,
        "runs": 2,
        "failures_in_a_row": 2,
        "last_at": 1_000.0,
        "last_error": "again",
        "last_pruned": None,
        "last_rows": None,
    }
    assert "prune failed (1 in a row), next in 60 s: no route to host; second line" in caplog.text
    report = schedule.run_once()
    assert report is not None and report.pruned == 3
    details = schedule.details()
    assert (details["failures_in_a_row"], details["last_error"]) == (0, None)
    assert (details["last_pruned"], details["last_rows"]) == (3, 30)
    assert (run.calls, run.keep_ms) == (3, 86_400_000)


def test_nothing_is_pruned_before_one_interval_and_close_ends_the_thread() -> None:
    run = FakePrune()
    schedule = PruneSchedule(load_settings({}), 3_600, run=run)
    schedule.start()
    schedule.close(timeout_s=5)
    assert not schedule._thread.is_alive()
    assert run.calls == 0


def test_the_stop_reaches_the_prune_in_progress() -> None:
    seen: list[bool] = []

    def run(settings: Settings, stop: threading.Event, keep_ms: int) -> PruneReport:
        seen.append(stop.is_set())
        schedule.close(timeout_s=0)  # as a SIGTERM during the prune would
        seen.append(stop.is_set())
        return _report(0)

    schedule = PruneSchedule(load_settings({}), 60, run=run)
    schedule.run_once()
    assert seen == [False, True]


def test_only_the_first_share_prunes() -> None:
    settings = load_settings({})
    assert prune_schedule(settings, None, None) is None
    assert prune_schedule(settings, 3_600, Share.parse("1/2")) is None
    first = prune_schedule(settings, 3_600, Share.parse("0/2"))
    assert first is not None
    first.close(timeout_s=5)


@pytest.mark.parametrize(
    ("given", "seconds"), [("off", None), ("1s", 1.0), ("6h", 21_600.0), ("1d", 86_400.0)]
)
def test_the_interval_is_a_duration_of_a_second_or_more(given: str, seconds: float) -> None:
    parser = argparse.ArgumentParser()
    add_prune_every_option(parser)
    assert parser.parse_args(["--prune-every", given]).prune_every == seconds


@pytest.mark.parametrize("given", ["500ms", "0s", "6", "-1h", "soon"])
def test_an_interval_under_a_second_or_not_a_duration_is_refused(
    given: str, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser()
    add_prune_every_option(parser)
    with pytest.raises(SystemExit):
        parser.parse_args([f"--prune-every={given}"])
    assert "(or off)" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("given", "ms"), [("0s", 0), ("400d", 400 * 86_400_000), ("90m", 5_400_000)]
)
def test_the_audit_horizon_is_a_duration(given: str, ms: int) -> None:
    parser = argparse.ArgumentParser()
    add_prune_every_option(parser)
    assert parser.parse_args(["--prune-keep", given]).prune_keep == ms


def test_the_audit_horizon_defaults_to_the_environment_and_refuses_a_non_duration(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SLUICEGATE_PRUNE_KEEP", "30d")
    parser = argparse.ArgumentParser()
    add_prune_every_option(parser)
    assert parser.parse_args([]).prune_keep == 30 * 86_400_000
    with pytest.raises(SystemExit):
        parser.parse_args(["--prune-keep", "a year"])
    assert "is not a duration" in capsys.readouterr().err


def test_the_interval_defaults_to_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLUICEGATE_PRUNE_EVERY", "2h")
    parser = argparse.ArgumentParser()
    add_prune_every_option(parser)
    assert parser.parse_args([]).prune_every == 7_200.0
    monkeypatch.delenv("SLUICEGATE_PRUNE_EVERY")
    parser = argparse.ArgumentParser()
    add_prune_every_option(parser)
    assert parser.parse_args([]).prune_every is None
