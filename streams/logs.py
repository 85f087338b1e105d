"""The log of every long-running component: one format, chosen once for a deployment.

``SLUICEGATE_LOG_FORMAT`` is ``json`` or ``text``; unset, a component keeps its own default
(JSON lines for the webhook and the paper venue, text for the others). ``sluicegate serve``
passes its choice to every child, so one stream holds one format.

``json``
    One object per line on stderr: ``ts`` (UTC, milliseconds), ``level``, ``logger``,
    ``message``, ``component`` (``processor``, ``projector:0/2``, ``serve`` ...) and ``pid``,
    then the record's own fields (``extra={"fields": {...}}``); a traceback is the
    ``exception`` member of the same line. What would otherwise reach stderr in another
    shape goes through the same formatter: an uncaught exception (any thread) as a
    ``critical`` line, a Python warning (logger ``py.warnings``) and librdkafka's own lines
    (logger ``sluicegate.kafka``).
``text``
    ``2026-12-07 11:40:00,123 INFO sluicegate.processor: message key=value ...``, a traceback
    on the lines after it.

``SLUICEGATE_LOG_LEVEL`` (``debug``, ``info``, ``warning``, ``error``; ``info`` when unset)
is the least level written, e.g. ``warning`` drops the webhook's line per request. It does
not hide librdkafka's lines: its own ``debug`` setting (``SLUICEGATE_RDKAFKA_DEBUG``) says
which it writes.

Not covered: what the interpreter writes when it cannot run Python code any more (a fatal
error, a ``faulthandler`` dump); a line that is not JSON is such a crash.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType

import orjson

from streams.settings import SettingsError

ENV = "SLUICEGATE_LOG_FORMAT"
LEVEL_ENV = "SLUICEGATE_LOG_LEVEL"
LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}
JSON = "json"
TEXT = "text"
FORMATS = (JSON, TEXT)
KAFKA_LOGGER = "sluicegate.kafka"
"""Where librdkafka's lines go (``streams.settings.Settings.kafka_logger``)."""
TEXT_LAYOUT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def chosen(environ: Mapping[str, str], default: str) -> str:
    """The format ``SLUICEGATE_LOG_FORMAT`` names (``default`` when unset or empty);
    :class:`SettingsError` naming the accepted values otherwise."""
    text = environ.get(ENV, "").strip().lower()
    if not text:
        return default
    if text not in FORMATS:
        raise SettingsError(f"{ENV}={environ[ENV]!r}: json or text")
    return text


def chosen_level(environ: Mapping[str, str]) -> int:
    """The level ``SLUICEGATE_LOG_LEVEL`` names (``info`` when unset or empty);
    :class:`SettingsError` naming the accepted values otherwise."""
    text = environ.get(LEVEL_ENV, "").strip().lower()
    if not text:
        return logging.INFO
    if text not in LEVELS:
        raise SettingsError(f"{LEVEL_ENV}={environ[LEVEL_ENV]!r}: {', '.join(LEVELS)}")
    return LEVELS[text]


def configured() -> str | None:
    """The format :func:`configure` installed in this process, ``None`` before it ran (or
    when the process had configured logging itself)."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler.formatter, JsonLineFormatter):
            return JSON
        if isinstance(handler.formatter, TextLineFormatter):
            return TEXT
    return None


@dataclass(frozen=True)
class LogSetup:
    """What :func:`configure` chose: the format and the logger librdkafka writes to."""

    format: str
    kafka_logger: logging.Logger


def configure(
    component: str,
    *,
    default: str = TEXT,
    environ: Mapping[str, str] = os.environ,
) -> LogSetup:
    """Log every logger of this process to stderr in the chosen format (module docstring).

    A process whose root logger already has a handler (a test, an embedding program) keeps
    it: only the librdkafka logger is returned. Records stop collecting thread, process and
    caller, which no line shows (an access-log line took 18 us, 11 us without: the caller's
    frame walk was most of it, as the logging HOWTO's "Optimization" section says).
    """
    fmt = chosen(environ, default)
    level = chosen_level(environ)
    kafka = logging.getLogger(KAFKA_LOGGER)
    kafka.setLevel(logging.DEBUG)  # what librdkafka's `debug` asks for is all shown
    root = logging.getLogger()
    if root.handlers:
        return LogSetup(fmt, kafka)
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    logging._srcfile = None  # the switch the HOWTO names for the caller lookup
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLineFormatter(component) if fmt == JSON else TextLineFormatter())
    root.addHandler(handler)
    root.setLevel(level)
    if fmt == JSON:
        logging.captureWarnings(True)
        sys.excepthook = _log_uncaught
        threading.excepthook = _log_uncaught_in_thread
    return LogSetup(fmt, kafka)


class JsonLineFormatter(logging.Formatter):
    """One JSON object per line (module docstring); never raises for a record's content."""

    def __init__(self, component: str) -> None:
        super().__init__()
        self.component = component

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            "component": self.component,
            "pid": os.getpid(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            for key, value in fields.items():
                line.setdefault(key, value)  # a field never replaces the six members
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        try:
            return orjson.dumps(line, default=str).decode("utf-8")
        except TypeError:
            # A lone surrogate (bytes a client sent that are not UTF-8) cannot be JSON as is.
            return orjson.dumps(_printable(line)).decode("utf-8")


class TextLineFormatter(logging.Formatter):
    """``time LEVEL logger: message`` and the record's fields as ``key=value``."""

    def __init__(self) -> None:
        super().__init__(TEXT_LAYOUT)

    def formatMessage(self, record: logging.LogRecord) -> str:
        text = super().formatMessage(record)
        fields = getattr(record, "fields", None)
        if not isinstance(fields, dict) or not fields:
            return text
        return text + "".join(f" {key}={_shown(value)}" for key, value in fields.items())


def _shown(value: object) -> str:
    if isinstance(value, str) and value and not any(c.isspace() or c in '"=' for c in value):
        return value
    try:
        return orjson.dumps(value, default=str).decode("utf-8")
    except TypeError:
        return orjson.dumps(_printable(value)).decode("utf-8")


def _printable(value: object) -> object:
    if isinstance(value, dict):
        return {str(k): _printable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_printable(v) for v in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    return str(value).encode("utf-8", "backslashreplace").decode("utf-8")


def _log_uncaught(
    kind: type[BaseException], value: BaseException, trace: TracebackType | None
) -> None:
    if issubclass(kind, KeyboardInterrupt):
        sys.__excepthook__(kind, value, trace)
        return
    logging.getLogger("sluicegate").critical("uncaught exception", exc_info=(kind, value, trace))


def _log_uncaught_in_thread(args: threading.ExceptHookArgs) -> None:
    if args.exc_value is None or issubclass(args.exc_type, SystemExit):
        return  # what threading's own hook ignores too
    name = args.thread.name if args.thread is not None else "?"
    logging.getLogger("sluicegate").critical(
        "uncaught exception in thread %s",
        name,
        exc_info=(args.exc_type, args.exc_value, args.exc_traceback),
    )
