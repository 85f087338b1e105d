"""The paper venue imports nothing from the product: only the standard library and aiohttp.

Checked on the source (ast), so an import in a rarely taken branch is caught too. The venue
must be able to outlive the gateway and must never share a bug with the adapters it tests.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import consumers.paper_venue

VENUE_DIR = Path(consumers.paper_venue.__file__).parent
SOURCES = sorted(VENUE_DIR.glob("*.py"))
ALLOWED_THIRD_PARTY = frozenset({"aiohttp"})


def imported_roots(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "relative imports hide where a module comes from"
            assert node.module is not None
            found.add(node.module)
    return found


def test_the_venue_has_modules_to_check() -> None:
    assert {"server.py", "engine.py", "store.py", "binance_api.py"} <= {p.name for p in SOURCES}


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_imports_only_stdlib_aiohttp_and_itself(source: Path) -> None:
    for module in imported_roots(ast.parse(source.read_text(encoding="utf-8"))):
        root = module.split(".")[0]
        if module == "consumers.paper_venue" or module.startswith("consumers.paper_venue."):
            continue
        assert root in sys.stdlib_module_names or root in ALLOWED_THIRD_PARTY, (
            f"{source.name} imports {module}: the paper venue may use only the standard "
            "library, aiohttp and its own modules"
        )


def test_the_checker_would_catch_a_product_import() -> None:
    tree = ast.parse("from consumers.venue.adapter import Accepted\nimport orjson\n")
    roots = {m.split(".")[0] for m in imported_roots(tree)}
    assert "orjson" in roots
    assert "consumers.venue.adapter" in imported_roots(tree)
    assert "orjson" not in sys.stdlib_module_names
