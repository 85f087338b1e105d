"""Every package ships its type information (PEP 561 ``py.typed``) in the distribution."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("schemas", "streams", "consumers", "projections", "sluicegate")


def test_every_package_has_py_typed_and_ships_it() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    package_data = project["tool"]["setuptools"]["package-data"]
    for package in PACKAGES:
        assert (ROOT / package / "py.typed").is_file(), package
        assert "py.typed" in package_data[package], package
