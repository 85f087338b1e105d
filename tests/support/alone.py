"""Tests that stop the shared broker or PostgreSQL run alone.

``make test`` runs the suite on several pytest-xdist workers side by side on one broker and
one PostgreSQL cluster, then the tests marked ``exclusive`` in a session of their own. A test
that restarts either service beside the others would fail them, so the helpers that do it
call ``require_alone`` first.
"""

from __future__ import annotations

import os


class NotAlone(RuntimeError):
    """A test stopping a shared service ran beside other tests (an xdist worker)."""


def require_alone(what: str) -> None:
    """Raise ``NotAlone`` when this process is one of several xdist workers.

    Mark the test ``@pytest.mark.exclusive``: ``make test`` runs those on their own.
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is not None:
        raise NotAlone(
            f"{what} while other tests run beside this one (xdist worker {worker}): "
            "mark the test @pytest.mark.exclusive"
        )
