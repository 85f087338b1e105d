"""Only the Faust bridge (and what is built on it) imports Faust or aiokafka."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("sluicegate", "schemas", "streams", "consumers", "projections")
ALLOWED = ROOT / "consumers" / "faust_bridge"
OPTIONAL = {"faust", "aiokafka", "mode"}


def _imported_roots(path: Path) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_no_product_module_outside_the_bridge_imports_faust() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}: {sorted(_imported_roots(path) & OPTIONAL)}"
        for package in PRODUCT
        for path in (ROOT / package).rglob("*.py")
        if ALLOWED not in path.parents and _imported_roots(path) & OPTIONAL
    ]
    assert offenders == []


def test_the_bridge_is_seen_by_this_scan() -> None:
    assert _imported_roots(ALLOWED / "app.py") & OPTIONAL == {"faust"}
