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


# What Python makes of argument bytes that are not UTF-8 (0xff 0xfe), and a NUL, which a
# program calling main() can pass although a shell cannot.
NOT_UTF8 = "\udcff\udcfe"


@pytest.mark.parametrize(
    ("argv", "argument", "said"),
    [
        (["runs", "show", NOT_UTF8], "RUN_ID", "byte 0xff at position 0 is not UTF-8"),
        (["runs", "timeline", NOT_UTF8], "RUN_ID", "byte 0xff at position 0 is not UTF-8"),
        (["runs", "rerun", "run-1", "--reason", "ok" + NOT_UTF8], "--reason", "position 2"),
        (["occurrences", "show", NOT_UTF8], "ADMISSION_KEY", "byte 0xff"),
        (["scopes", "show", "paper|a=" + NOT_UTF8], "SCOPE_KEY", "byte 0xff at position 8"),
        (["holds", "resolve", "run-1.entry", "--reason", NOT_UTF8], "--reason", "byte 0xff"),
        (["recover", "--run", NOT_UTF8], "--run", "byte 0xff"),
        (["replay", "--scope", NOT_UTF8], "--scope", "byte 0xff"),
        (["worker", "--slot", NOT_UTF8], "--slot", "byte 0xff"),
        (["processor", "--instance-id", NOT_UTF8], "--instance-id", "byte 0xff"),
        (["runs", "show", "a\x00b"], "RUN_ID", "a NUL character at position 1"),
    ],
    ids=lambda v: " ".join(v[:2]) if isinstance(v, list) else None,
)
def test_an_argument_that_is_not_text_is_a_usage_error_before_anything_is_contacted(
    argv: list[str], argument: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"error: argument {argument}: " in err
    assert said in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["projections", "rebuild", "--workers", "\u00b2"], "1 to 64"),
        (["projections", "rebuild", "--workers", "800"], "1 to 64"),
        (["projector", "--share", "\u00b2/2"], "expected K/N"),
        (["projector", "--share", "0/" + "9" * 5000], "expected K/N"),
    ],
    ids=lambda v: " ".join(v[:3]) if isinstance(v, list) else None,
)
def test_a_number_argument_that_is_not_ascii_digits_in_range_is_a_usage_error(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``"²"`` passes ``str.isdigit`` and fails ``int``; so do 5,000 digits."""
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err


@pytest.mark.parametrize(
    "argv",
    [
        [*command, "--wait", value]
        for command in (
            ["runs", "rerun", "run-1", "--reason", "r"],
            ["recover"],
            ["holds", "resolve", "action-1", "--reason", "r"],
            ["projections", "check"],
        )
        for value in ("nan", "inf", "-1", "3601", "1e400", "\u00b2", "")
    ],
    ids=lambda v: " ".join(v[:2] + v[-1:]),
)
def test_a_wait_that_is_not_a_number_of_seconds_up_to_an_hour_is_a_usage_error(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """``float`` takes ``nan`` (which then waited not at all, and said it waited "nan s"),
    ``inf`` (forever) and negatives."""
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "error: argument --wait: not a number of seconds" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "seconds"),
    [
        (["runs", "rerun", "run-1", "--reason", "r", "--wait", "0"], 0.0),
        (["recover", "--wait", "2.5"], 2.5),
        (["holds", "resolve", "action-1", "--reason", "r"], 15.0),
        (["projections", "check", "--wait", " 3600 "], 3600.0),
    ],
)
def test_a_wait_in_range_is_taken(argv: list[str], seconds: float) -> None:
    assert cli.build_parser().parse_args(argv).wait == seconds


def test_a_file_argument_may_name_a_path_that_is_not_utf8(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """File names are bytes on Linux: only the file's content has to be UTF-8."""
    assert cli.main(["workflows", "apply", "/nonexistent/" + NOT_UTF8 + ".toml"]) == 1
    assert "cannot read /nonexistent/" in capsys.readouterr().err


def test_the_venues_file_and_directory_options_may_name_paths_that_are_not_utf8() -> None:
    args = cli.build_parser().parse_args(
        ["venue", "--config", "/x/" + NOT_UTF8 + ".toml", "--state-dir", "/y/\udce9"]
    )
    assert (str(args.config), str(args.state_dir)) == ("/x/" + NOT_UTF8 + ".toml", "/y/\udce9")


def test_the_venue_refuses_a_setting_that_is_not_utf8_before_it_listens(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SLUICEGATE_VENUE_HTTP", "127.0.0.\udcff:18099")
    assert cli.main(["venue"]) == 1
    assert capsys.readouterr().err == (
        "sluicegate venue: SLUICEGATE_VENUE_HTTP: byte 0xff at position 8 is not UTF-8; "
        "set it again as UTF-8 text\n"
    )
