"""The project's shell scripts signal processes by pid, never by matching names: a kill by
process name or command line would hit every matching process on the machine, not just
Sluicegate's."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The tool names are assembled so that this file does not itself match a scan for them.
_BY_NAME_TOOLS = ("p" + "kill", "kill" + "all", r"pgrep\s[^|]*\|\s*xargs\s+kill")
BY_NAME = re.compile(r"\b(" + "|".join(_BY_NAME_TOOLS) + r")\b")


def test_no_script_kills_processes_by_name() -> None:
    scripts = [*ROOT.glob("scripts/**/*.sh"), ROOT / "Makefile"]
    assert any(p.name == "demo.sh" for p in scripts)
    offenders = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in scripts
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if BY_NAME.search(line) and not line.lstrip().startswith("#")
    ]
    assert offenders == []


def test_the_demo_takes_the_processor_pid_from_serves_pid_file() -> None:
    demo = (ROOT / "scripts" / "demo.sh").read_text()
    assert "serve --pid-file" in demo
    assert 'kill -9 "$processor_pid"' in demo
