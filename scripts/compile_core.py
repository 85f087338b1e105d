"""Compile the admission core with mypyc, in place (``make install`` runs this).

    python scripts/compile_core.py            build what changed (nothing when up to date)
    python scripts/compile_core.py --clean    remove the compiled modules: run interpreted
    python scripts/compile_core.py --require  fail (exit 1) instead of falling back

Which modules and why: ``sluicegate/native.py``. The C sources and object files go to
``var/build/mypyc``; the extension modules land next to their sources, with
``streams/core/compiled.json`` recording the source each was built from. Without a C compiler,
Python headers or mypy, the build fails, everything compiled is removed and the core runs as
plain Python (slower, same behaviour): this script then says so and exits 0, unless
``--require``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sluicegate import native  # noqa: E402 - after the checkout is on the path

BUILD_DIR = ROOT / "var" / "build" / "mypyc"


def artifacts() -> list[Path]:
    """Every compiled file of the core that exists, the shared library and manifest included."""
    found = [native.compiled_path(m) for m in native.COMPILED]
    found = [p for p in found if p.exists()]
    for name in native.GROUPS:
        group = ROOT.joinpath(*name.split("."))
        found += sorted(group.parent.glob(f"{group.name}__mypyc.*"))
    if (ROOT / native.MANIFEST).exists():
        found.append(ROOT / native.MANIFEST)
    return found


def clean() -> None:
    for path in artifacts():
        path.unlink()


def up_to_date() -> bool:
    return native.mode() == "compiled" and not native.stale()


def build() -> None:
    from mypyc.build import mypycify
    from setuptools import setup

    modules = [
        extension
        for group, members in native.GROUPS.items()
        for extension in mypycify(
            [str(native.source_path(m).relative_to(ROOT)) for m in members],
            group_name=group,
            opt_level="3",
            target_dir=str(BUILD_DIR / "c" / group),
        )
    ]
    setup(
        name="sluicegate-core-compiled",
        ext_modules=modules,
        script_args=[
            "--quiet",
            "build_ext",
            "--inplace",
            "--parallel",
            str(os.cpu_count() or 1),
            "--build-temp",
            str(BUILD_DIR / "temp"),
        ],
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clean", action="store_true", help="remove the compiled modules")
    parser.add_argument("--require", action="store_true", help="fail rather than fall back")
    args = parser.parse_args(argv)
    os.chdir(ROOT)
    if args.clean:
        clean()
        print("compile_core: removed the compiled core; it runs interpreted")
        return 0
    if up_to_date():
        print("compile_core: the compiled core is up to date")
        return 0
    clean()
    digests = native.sources()
    try:
        build()
    except (Exception, SystemExit) as e:  # setuptools exits on a failed compiler run
        clean()
        print(f"compile_core: could not compile the core ({e}); it runs interpreted", flush=True)
        return 1 if args.require else 0
    manifest = json.dumps({"modules": digests}, indent=1, sort_keys=True)
    (ROOT / native.MANIFEST).write_text(manifest + "\n")
    if native.mode() != "compiled" or native.stale():
        print(f"compile_core: the build left the core {native.mode()}", flush=True)
        return 1
    print(f"compile_core: compiled {len(native.COMPILED)} modules of the core")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
