"""Test-run hooks: the topics and state directories a test module created are deleted when
the module ends, and whatever is left when the session ends."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from streams.settings import load_settings
from tests.support.kafka import ISSUED_PREFIXES, delete_issued_topics

# Tests never assert wall-clock time, and hypothesis' per-example deadline (200 ms) and its
# too-slow health check are wall-clock limits: on 4 workers sharing 2 cores, a first example
# that built the fast reader took 278 ms once, and the next 0.11 ms.
settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")

STATE_ROOT = Path(__file__).resolve().parents[1] / "var" / "test-state"
KEEP = os.environ.get("SLUICEGATE_KEEP_TEST_TOPICS") == "1"
"""``SLUICEGATE_KEEP_TEST_TOPICS=1`` keeps every test topic, for a post-mortem."""


def _clean(prefixes: Iterable[str]) -> None:
    # Only prefixes this process issued: test runs side by side on one broker never delete
    # each other's topics. A broker that is gone leaves them for `make reset`.
    chosen = set(prefixes)
    if KEEP or not chosen:
        return
    with contextlib.suppress(Exception):
        delete_issued_topics(load_settings({}), chosen)
    for prefix in chosen:
        shutil.rmtree(STATE_ROOT / prefix, ignore_errors=True)


@pytest.fixture(scope="module", autouse=True)
def _module_topics() -> Iterator[None]:
    """Delete the topics of the prefixes issued while this module ran, after its fixtures.

    A broker that keeps every test's topics slows down as they pile up (thousands of
    partitions make each new topic and each group join slower).
    """
    before = set(ISSUED_PREFIXES)
    yield
    _clean(ISSUED_PREFIXES - before)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _clean(ISSUED_PREFIXES)


@pytest.hookimpl(wrapper=True)
def pytest_report_to_serializable(config: pytest.Config, report: Any) -> Any:
    """A report an xdist worker sends its controller, with every lone surrogate escaped.

    Hostile-bytes tests log and print text decoded with ``surrogateescape``; the workers'
    channel encodes strings as strict UTF-8, and one such string in a captured log would
    kill the worker and lose the tests it had left.
    """
    return _encodable((yield))


def _encodable(value: Any) -> Any:
    if isinstance(value, str):
        try:
            value.encode()
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode()
        return value
    if isinstance(value, dict):
        return {k: _encodable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_encodable(v) for v in value)
    return value
