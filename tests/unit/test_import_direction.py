"""Imports point one way, from the data contract up to the CLI (docs/design.md, "Layout").

::

    schemas -> streams.errors / streams.settings / streams.kafka -> streams.core
            -> streams.engine / streams.apps / streams.adapters -> consumers, projections
            -> sluicegate

A module may import its own layer and the layers below it, never one above. Besides:
``consumers`` and ``projections`` do not import each other, the paper venue imports nothing
from the product, the engine knows no app or adapter, and nothing discovers modules with
``importlib`` (the CLI imports its command modules and error roots by name). Checked on the
source (ast) of every product module, so an import inside a function counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("schemas", "streams", "consumers", "projections", "sluicegate")
SOURCES = sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))

LAYERS: tuple[tuple[str, int], ...] = (
    ("schemas", 0),
    ("streams", 1),  # the package itself (empty); every module in it has its own layer
    ("streams.errors", 1),
    ("streams.settings", 1),
    ("streams.collector", 1),
    ("streams.clock", 1),
    ("streams.heartbeat", 1),
    ("streams.text", 1),
    ("streams.exposition", 1),
    ("streams.logs", 1),
    ("streams.kafka", 1),
    ("streams.core", 2),
    ("streams.engine", 3),
    ("streams.apps", 3),
    ("streams.adapters", 3),
    ("consumers", 4),
    ("projections", 4),
    ("sluicegate", 5),
)
APART = (
    ("consumers", "projections"),
    ("projections", "consumers"),
    ("streams.engine", "streams.apps"),
    ("streams.engine", "streams.adapters"),
)
"""(importer, imported) pairs that must never meet, although the layers would allow it."""
SEALED = "consumers.paper_venue"
"""Imports nothing from the product: it stands in for an exchange."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def layer(module: str) -> tuple[str, int] | None:
    """The layer of a product module (the longest matching prefix), ``None`` for others."""
    found = [(p, n) for p, n in LAYERS if within(module, p)]
    return max(found, key=lambda item: len(item[0])) if found else None


def imports(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, module)`` for every import, ``from package import module`` resolved."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"line {node.lineno}: relative imports hide where code is"
            assert node.module is not None
            if node.module in ("importlib", *PACKAGES):
                found.extend((node.lineno, f"{node.module}.{a.name}") for a in node.names)
            if node.module != "importlib":
                found.append((node.lineno, node.module))
    return found


def problems(importer: str, tree: ast.AST) -> list[str]:
    own = layer(importer)
    assert own is not None, importer
    found: list[str] = []
    for line, imported in imports(tree):
        if imported.split(".")[0] == "importlib" and imported != "importlib.resources":
            found.append(f"{importer}:{line} imports {imported}: import modules by name")
        target = layer(imported)
        if target is None:
            continue
        if within(importer, SEALED) and not within(imported, SEALED):
            found.append(f"{importer}:{line} imports {imported}: the paper venue is sealed")
        if target[1] > own[1]:
            found.append(f"{importer}:{line} imports {imported}: {target[0]} is above {own[0]}")
        for low, high in APART:
            if within(importer, low) and within(imported, high):
                found.append(f"{importer}:{line} imports {imported}: {low} never imports {high}")
    return found


def _id(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_every_product_package_is_checked() -> None:
    names = {module_name(p) for p in SOURCES}
    assert {"schemas.topics", "streams.settings", "sluicegate.cli"} <= names
    for name in names:
        found = layer(name)
        assert found is not None, name
        assert found[0] != "streams" or name == "streams", f"{name} belongs to no layer"


@pytest.mark.parametrize("source", SOURCES, ids=_id)
def test_imports_point_down(source: Path) -> None:
    tree = ast.parse(source.read_text(encoding="utf-8"))
    assert problems(module_name(source), tree) == []


def test_the_checker_would_catch_each_kind_of_violation() -> None:
    upward = ast.parse("from sluicegate.errors import SluicegateError\n")
    assert problems("streams.core.identity", upward)
    sideways = ast.parse("def f():\n    from projections import queries\n")
    assert problems("consumers.ingest.app", sideways)
    sealed = ast.parse("import schemas.codec\n")
    assert problems("consumers.paper_venue.engine", sealed)
    engine = ast.parse("from streams.apps import admission\n")
    assert problems("streams.engine.processor", engine)
    discovery = ast.parse("import importlib\n")
    assert problems("sluicegate.cli", discovery)
    assert problems("sluicegate.cli", ast.parse("import projections.http\n")) == []
    assert problems("projections.migrate", ast.parse("from importlib import resources\n")) == []
