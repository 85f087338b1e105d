"""One log format per deployment (``streams/logs.py``): the choice, both line shapes, and
what JSON mode routes through the formatter that would otherwise reach stderr raw."""

from __future__ import annotations

import logging
import sys
import threading
import warnings
from collections.abc import Callable, Iterator

import orjson
import pytest

from streams import logs
from streams.settings import SettingsError


@pytest.fixture
def bare_logging(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[], None]]:
    """Restores everything configure() changes; calling it empties the root logger's
    handlers (in the test itself: pytest adds its own when the test starts)."""
    root = logging.getLogger()
    monkeypatch.setattr(root, "level", root.level)
    for name in ("logThreads", "logProcesses", "logMultiprocessing", "_srcfile"):
        monkeypatch.setattr(logging, name, getattr(logging, name))
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)
    monkeypatch.setattr(threading, "excepthook", threading.excepthook)
    kafka = logging.getLogger(logs.KAFKA_LOGGER)
    monkeypatch.setattr(kafka, "level", kafka.level)
    try:
        yield lambda: monkeypatch.setattr(root, "handlers", [])
    finally:
        logging.captureWarnings(False)
        for handler in root.handlers:
            handler.close()


@pytest.mark.parametrize(
    ("value", "default", "expected"),
    [
        (None, logs.TEXT, "text"),
        (None, logs.JSON, "json"),
        ("", logs.JSON, "json"),
        ("json", logs.TEXT, "json"),
        (" JSON ", logs.TEXT, "json"),
        ("text", logs.JSON, "text"),
    ],
)
def test_the_variable_chooses_and_unset_keeps_the_components_default(
    value: str | None, default: str, expected: str
) -> None:
    environ = {} if value is None else {logs.ENV: value}
    assert logs.chosen(environ, default) == expected


@pytest.mark.parametrize("value", ["jsonl", "logfmt", "1", "json,text"])
def test_a_format_that_does_not_exist_is_refused_by_name(value: str) -> None:
    with pytest.raises(SettingsError, match=r"SLUICEGATE_LOG_FORMAT=.*: json or text"):
        logs.chosen({logs.ENV: value}, logs.TEXT)


def _record(message: str = "committed %d", *args: object, **fields: object) -> logging.LogRecord:
    record = logging.LogRecord(
        "sluicegate.processor", logging.INFO, __file__, 1, message, args or (7,), None
    )
    if fields:
        record.fields = fields
    return record


def test_a_json_line_names_time_level_logger_component_pid_and_its_fields() -> None:
    line = orjson.loads(logs.JsonLineFormatter("projector:0/2").format(_record(offset=41)))
    assert line["ts"].endswith("+00:00") and len(line["ts"]) == len("2026-12-07T11:40:00.123+00:00")
    assert {k: v for k, v in line.items() if k not in ("ts", "pid")} == {
        "level": "info",
        "logger": "sluicegate.processor",
        "message": "committed 7",
        "component": "projector:0/2",
        "offset": 41,
    }
    assert isinstance(line["pid"], int)


def test_a_field_named_like_a_member_does_not_replace_it() -> None:
    record = _record()
    record.fields = {"message": "forged", "level": "debug", "component": "venue", "status": 202}
    line = orjson.loads(logs.JsonLineFormatter("ingest").format(record))
    assert (line["message"], line["level"], line["component"], line["status"]) == (
        "committed 7",
        "info",
        "ingest",
        202,
    )


def test_a_traceback_is_a_member_of_the_same_json_line() -> None:
    try:
        raise ValueError("broken\nacross lines")
    except ValueError:
        record = _record()
        record.exc_info = sys.exc_info()
    text = logs.JsonLineFormatter("gate").format(record)
    assert "\n" not in text
    assert "ValueError: broken\nacross lines" in orjson.loads(text)["exception"]


def test_a_log_line_with_bytes_that_are_not_utf8_is_still_one_json_line() -> None:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "ua %s", ("a\udcffb",), None)
    record.fields = {"path": "/v1/hooks/\udce9"}
    line = orjson.loads(logs.JsonLineFormatter("ingest").format(record))
    assert line["message"] == "ua a\\udcffb"
    assert line["path"] == "/v1/hooks/\\udce9"


def test_a_text_line_shows_the_fields_quoting_what_has_spaces() -> None:
    text = logs.TextLineFormatter().format(
        _record(status=202, path="/v1/hooks/a b", delivery_id="d-1", empty="")
    )
    assert text.endswith(
        ' INFO sluicegate.processor: committed 7 status=202 path="/v1/hooks/a b" '
        'delivery_id=d-1 empty=""'
    )


def test_configured_json_writes_one_line_per_record_without_collecting_callers(
    bare_logging: Callable[[], None], capsys: pytest.CaptureFixture[str]
) -> None:
    bare_logging()
    setup = logs.configure("ingest", default=logs.JSON, environ={})
    assert (setup.format, logs.configured()) == ("json", "json")
    assert setup.kafka_logger.name == "sluicegate.kafka"
    assert setup.kafka_logger.level == logging.DEBUG  # librdkafka's `debug` lines are shown
    logging.getLogger("sluicegate.ingest.access").info(
        "request", extra={"fields": {"status": 202, "delivery_id": "d-1"}}
    )
    (line,) = capsys.readouterr().err.splitlines()
    record = orjson.loads(line)
    assert (record["logger"], record["component"], record["message"]) == (
        "sluicegate.ingest.access",
        "ingest",
        "request",
    )
    assert (record["status"], record["delivery_id"]) == (202, "d-1")
    assert logging._srcfile is None and not logging.logThreads


def test_the_variable_overrides_a_components_default(
    bare_logging: Callable[[], None], capsys: pytest.CaptureFixture[str]
) -> None:
    bare_logging()
    logs.configure("ingest", default=logs.JSON, environ={logs.ENV: "text"})
    logging.getLogger("sluicegate.ingest").warning("slow")
    (line,) = capsys.readouterr().err.splitlines()
    assert line.endswith(" WARNING sluicegate.ingest: slow") and logs.configured() == "text"


def test_json_mode_logs_uncaught_exceptions_and_warnings_as_json_lines(
    bare_logging: Callable[[], None], capsys: pytest.CaptureFixture[str]
) -> None:
    bare_logging()
    logs.configure("worker", environ={logs.ENV: "json"})
    try:
        raise RuntimeError("lost the broker")
    except RuntimeError:
        sys.excepthook(*sys.exc_info())

    def crash() -> None:
        raise OSError("disk full")

    thread = threading.Thread(target=crash, name="prune")
    thread.start()
    thread.join()
    warnings.warn("deprecated setting", DeprecationWarning, stacklevel=1)
    lines = [orjson.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert [(r["level"], r["logger"], r["message"]) for r in lines] == [
        ("critical", "sluicegate", "uncaught exception"),
        ("critical", "sluicegate", "uncaught exception in thread prune"),
        ("warning", "py.warnings", lines[2]["message"]),
    ]
    assert "RuntimeError: lost the broker" in lines[0]["exception"]
    assert "OSError: disk full" in lines[1]["exception"]
    assert "DeprecationWarning: deprecated setting" in lines[2]["message"]
    assert {r["component"] for r in lines} == {"worker"}


def test_a_process_that_configured_logging_keeps_its_handlers(
    bare_logging: Callable[[], None],
) -> None:
    bare_logging()
    mine = logging.NullHandler()
    logging.getLogger().addHandler(mine)
    hook = sys.excepthook
    setup = logs.configure("processor", environ={logs.ENV: "json"})
    assert logging.getLogger().handlers == [mine] and sys.excepthook is hook
    assert setup.format == "json" and logs.configured() is None


@pytest.mark.parametrize(
    ("value", "level"),
    [(None, logging.INFO), ("", logging.INFO), ("debug", logging.DEBUG), (" Warning ", 30)],
)
def test_the_level_variable_names_the_least_level_written(value: str | None, level: int) -> None:
    assert logs.chosen_level({} if value is None else {logs.LEVEL_ENV: value}) == level


@pytest.mark.parametrize("value", ["verbose", "10", "warn", "critical"])
def test_a_level_that_is_not_offered_is_refused_with_the_ones_that_are(value: str) -> None:
    with pytest.raises(
        SettingsError, match=r"SLUICEGATE_LOG_LEVEL=.*: debug, info, warning, error"
    ):
        logs.chosen_level({logs.LEVEL_ENV: value})


def test_level_warning_drops_info_lines_but_not_librdkafkas(
    bare_logging: Callable[[], None], capsys: pytest.CaptureFixture[str]
) -> None:
    bare_logging()
    setup = logs.configure("ingest", environ={logs.ENV: "json", logs.LEVEL_ENV: "warning"})
    logging.getLogger("sluicegate.ingest.access").info("request")
    logging.getLogger("sluicegate.ingest").warning("slow broker")
    setup.kafka_logger.debug("[sluicegate-ingest#producer-1] connected")  # debug= asked for it
    lines = [orjson.loads(line)["message"] for line in capsys.readouterr().err.splitlines()]
    assert lines == ["slow broker", "[sluicegate-ingest#producer-1] connected"]
