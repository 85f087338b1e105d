"""Session-wide hooks: the topics a test run created are deleted when it ends."""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

import pytest

from streams.settings import load_settings
from tests.support.kafka import ISSUED_PREFIXES, delete_issued_topics

STATE_ROOT = Path(__file__).resolve().parents[1] / "var" / "test-state"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Delete this run's test topics and state directories.

    Only prefixes this process issued are touched, so test runs side by side on one broker
    never delete each other's topics. ``SLUICEGATE_KEEP_TEST_TOPICS=1`` keeps them for a
    post-mortem of a failed run.
    """
    if not ISSUED_PREFIXES or os.environ.get("SLUICEGATE_KEEP_TEST_TOPICS") == "1":
        return
    # A broker that is gone leaves the topics for `make reset`.
    with contextlib.suppress(Exception):
        delete_issued_topics(load_settings({}))
    for prefix in ISSUED_PREFIXES:
        shutil.rmtree(STATE_ROOT / prefix, ignore_errors=True)
