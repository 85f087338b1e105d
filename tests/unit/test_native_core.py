"""The compiled admission core: never run when it does not match its source.

Each test builds a small checkout of its own (the compiled modules' sources, a stand-in
extension file, a manifest) so that nothing here depends on whether this machine compiled
the real one; the last tests look at the real checkout.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

from sluicegate import cli, native

COMPILED_SUFFIX = native.EXTENSION_SUFFIX


def checkout(root: Path, *, compiled: tuple[str, ...] = native.COMPILED) -> Path:
    """Sources for every module of :data:`native.COMPILED`, ``compiled`` of them built."""
    for module in native.COMPILED:
        source = native.source_path(module, root)
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_text(f"# {module}\n")
    for module in compiled:
        native.compiled_path(module, root).write_bytes(b"\x7fELF")
    manifest = {"modules": native.sources(root)}
    root.joinpath(native.MANIFEST).write_text(json.dumps(manifest))
    return root


def test_a_build_that_matches_its_sources_runs(tmp_path: Path) -> None:
    root = checkout(tmp_path)
    assert native.mode(root) == "compiled"
    assert native.stale(root) == []
    native.check(root)


def test_a_changed_source_is_refused_with_what_to_do(tmp_path: Path) -> None:
    root = checkout(tmp_path)
    native.source_path("streams.core.identity", root).write_text("# a new rule\n")
    assert native.stale(root) == ["streams.core.identity"]
    with pytest.raises(native.StaleCompiledCore) as refused:
        native.check(root)
    message = str(refused.value)
    assert "streams.core.identity" in message
    assert "make install" in message
    assert "make interpreted" in message


def test_compiled_files_without_a_manifest_are_refused(tmp_path: Path) -> None:
    root = checkout(tmp_path)
    root.joinpath(native.MANIFEST).unlink()
    assert native.stale(root) == list(native.COMPILED)


def test_a_manifest_that_is_not_one_counts_as_none(tmp_path: Path) -> None:
    root = checkout(tmp_path)
    root.joinpath(native.MANIFEST).write_text('["not", "a", "manifest"]')
    assert native.built(root) is None
    assert native.stale(root) == list(native.COMPILED)


def test_the_interpreted_core_needs_no_build(tmp_path: Path) -> None:
    root = checkout(tmp_path, compiled=())
    native.source_path("streams.core.identity", root).write_text("# edited freely\n")
    assert native.mode(root) == "interpreted"
    native.check(root)


def test_a_partial_build_is_reported_as_such(tmp_path: Path) -> None:
    root = checkout(tmp_path, compiled=native.COMPILED[:3])
    assert native.mode(root) == "partly compiled"
    native.check(root)  # what is there matches; the rest runs as Python


def test_every_command_refuses_a_stale_core(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = checkout(tmp_path)
    native.source_path("streams.core.state_codec", root).write_text("# changed\n")
    monkeypatch.setattr(native, "ROOT", root)
    assert cli.main(["runs", "show", "run-0"]) == 1
    err = capsys.readouterr().err
    assert "streams.core.state_codec" in err
    assert "make install" in err


def test_each_compiled_module_is_built_into_one_library_of_its_own_package() -> None:
    # A module in another package's library would make it load that package's code.
    grouped = [m for members in native.GROUPS.values() for m in members]
    assert sorted(grouped) == sorted(native.COMPILED)
    assert len(set(grouped)) == len(grouped)
    for group, members in native.GROUPS.items():
        package = group.rpartition(".")[0]
        assert all(m.startswith(package + ".") for m in members), group


def test_this_checkout_runs_what_its_sources_say() -> None:
    # Fails after a core source was edited without `make install`: rebuild, or
    # `make interpreted`, before trusting any other test's result.
    native.check()


def test_each_module_is_imported_in_the_form_this_run_asked_for() -> None:
    # `make test` runs the core's tests twice: as built, and with -p tests.support.interpreted.
    interpreted = "tests.support.interpreted" in sys.modules
    if native.mode() != "compiled" and not interpreted:
        pytest.skip(f"the core is {native.mode()} here")
    suffix = ".py" if interpreted else COMPILED_SUFFIX
    for module in native.COMPILED:
        loaded = importlib.import_module(module).__file__ or ""
        assert loaded.endswith(suffix), f"{module} was imported from {loaded}"
