"""The suite runs on several xdist workers (``make test``): what keeps that safe."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.support.alone import NotAlone, require_alone

REPO = Path(__file__).resolve().parents[2]


def test_stopping_a_shared_service_beside_other_tests_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    with pytest.raises(NotAlone, match=r"gw1.*mark the test @pytest\.mark\.exclusive"):
        require_alone("kafka.sh down")
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    require_alone("kafka.sh down")  # alone: allowed


def test_hypothesis_examples_have_no_wall_clock_deadline() -> None:
    """Workers share the cores: a deadline would fail a correct test on a busy machine."""
    current = settings.default
    assert current is not None and current.deadline is None
    assert HealthCheck.too_slow in current.suppress_health_check


def test_a_captured_lone_surrogate_neither_kills_a_worker_nor_loses_tests(
    tmp_path: Path,
) -> None:
    """Hostile-bytes tests print text decoded with ``surrogateescape``: a worker sending
    such a report used to die, and the tests it had left were never run."""
    (tmp_path / "test_hostile_output.py").write_text(
        "import sys\n"
        "def test_prints_an_undecodable_byte():\n"
        "    print('caf\\udce9')\n"
        "    print('caf\\udce9', file=sys.stderr)\n"
        "    assert True\n"
        "def test_fails_with_one():\n"
        "    assert 'caf\\udce9' == ''\n"
        + "".join(f"def test_after_{n}():\n    pass\n" for n in range(6))
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "tests.conftest",
            "-n",
            "2",
            "-rA",
            str(tmp_path),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        errors="backslashreplace",
        timeout=120,
        check=False,
    )
    assert "1 failed, 7 passed" in done.stdout, done.stdout + done.stderr
    assert "INTERNALERROR" not in done.stdout + done.stderr
    assert "caf\\udce9" in done.stdout  # the failure and the captured output still shown
