"""The compiled admission core: which modules are compiled, and whether they match their source.

``make install`` compiles the pure core of run admission and the codec's varint reader (the
modules in :data:`COMPILED`, in the shared libraries of :data:`GROUPS`) to C extension
modules with mypyc (``scripts/compile_core.py``), next to their sources, so that Python
imports the compiled form. The Python source stays the only definition: the compiled
module is built from it, is checked by the same mypy --strict, and passes the same
tests. Compiled, the core's loop takes about a quarter less CPU per delivery and the
processor about 15% less (README, "The compiled core").

A compiled module that no longer matches its source would run old rules under new code
around it, silently. So the build writes :data:`MANIFEST` (the SHA-256 of every compiled
source), and :func:`check` refuses to run when a compiled source has changed since: every
``sluicegate`` command calls it before doing anything. An operator who sees that error runs
``make install`` (rebuilds what changed) or ``make interpreted`` (removes the compiled
modules; everything then runs as plain Python, as it does where no C compiler is installed,
for instance in the Docker image).

Not compiled, and why: the state records (``streams.core.admission.state``) and
``streams.core.records``, whose fast copy relies on an instance ``__dict__`` (mypyc's classes
have none, and their dataclass ``__init__`` stays interpreted anyway); ``lifecycle`` (a
generic frozen dataclass, which mypyc cannot build); ``documents`` (mypyc fails on it) and
``cloudevents`` (a surrogate code point literal mypyc refuses); the gate and journal cores
(their state codecs read dataclass type hints at import). Of these, the state records,
``records`` and ``lifecycle`` are on admission's per-delivery path.
"""

from __future__ import annotations

import hashlib
import json
import sys
import sysconfig
from pathlib import Path

from sluicegate.errors import SluicegateError

ROOT = Path(__file__).resolve().parents[1]
EXTENSION_SUFFIX = str(sysconfig.get_config_var("EXT_SUFFIX"))
"""What the build's extension modules end with (``.cpython-311-x86_64-linux-gnu.so``)."""
CORE: tuple[str, ...] = (
    "streams.core.admission.actions",
    "streams.core.admission.admit",
    "streams.core.admission.branches",
    "streams.core.admission.builders",
    "streams.core.admission.commands",
    "streams.core.admission.decide",
    "streams.core.admission.evolve",
    "streams.core.admission.rerun",
    "streams.core.canonical",
    "streams.core.durations",
    "streams.core.errors",
    "streams.core.fields",
    "streams.core.identity",
    "streams.core.intake",
    "streams.core.limits",
    "streams.core.reasons",
    "streams.core.refusals",
    "streams.core.retention",
    "streams.core.state_codec",
)
"""The admission core's modules compiled, by name (sorted)."""
CODEC: tuple[str, ...] = ("schemas.binary_reader",)
"""The codec's module compiled: every decode's varints and string arrays (``long_at``,
``string_array_at``; the generated readers stay interpreted and call them). A timestamp is a
six-byte varint, which the interpreted loop read in about 0.7 us and the compiled one in
0.16 us: a fifth to a third of decoding a record."""
GROUPS: dict[str, tuple[str, ...]] = {
    "streams.core.compiled": CORE,
    "schemas.compiled": CODEC,
}
"""mypyc's shared library per package, by its module name (``<name>__mypyc``): one per
package, so that the contract's compiled module never loads a library of the core's."""
COMPILED: tuple[str, ...] = CORE + CODEC
"""Every module compiled, by name."""
MANIFEST = Path("streams", "core", "compiled.json")
"""Written by the build, relative to the checkout: ``{"modules": {name: sha256 of source}}``."""


class StaleCompiledCore(SluicegateError):
    """A compiled module no longer matches its source: rebuild, or remove the compiled core."""


def source_path(module: str, root: Path | None = None) -> Path:
    return (root or ROOT).joinpath(*module.split(".")).with_suffix(".py")


def compiled_path(module: str, root: Path | None = None) -> Path:
    """Where the build puts the extension module of ``module`` (this interpreter's suffix)."""
    stem = (root or ROOT).joinpath(*module.split("."))
    return stem.with_name(stem.name + EXTENSION_SUFFIX)


def sources(root: Path | None = None) -> dict[str, str]:
    """The SHA-256 of each compiled module's current source."""
    return {
        module: hashlib.sha256(source_path(module, root).read_bytes()).hexdigest()
        for module in COMPILED
    }


def built(root: Path | None = None) -> dict[str, str] | None:
    """What the manifest says the compiled modules were built from; ``None`` without one."""
    try:
        document = json.loads((root or ROOT).joinpath(MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    modules = document.get("modules") if isinstance(document, dict) else None
    if not isinstance(modules, dict):
        return None
    return {str(k): str(v) for k, v in modules.items()}


def stale(root: Path | None = None) -> list[str]:
    """Compiled modules whose source changed since the build, or that have no record of it.

    Empty when nothing is compiled (the interpreted core) or everything matches.
    """
    present = [m for m in COMPILED if compiled_path(m, root).exists()]
    if not present:
        return []
    recorded = built(root) or {}
    current = sources(root)
    return [m for m in present if recorded.get(m) != current[m]]


def mode(root: Path | None = None) -> str:
    """``compiled`` (every module in :data:`COMPILED`), ``interpreted`` (none) or
    ``partly compiled``, for logs and benchmark notes: judged by the form a module was
    imported in, and by the files present for those not imported yet."""
    present = sum(1 for m in COMPILED if _compiled(m, root))
    if present == len(COMPILED):
        return "compiled"
    return "interpreted" if present == 0 else "partly compiled"


def _compiled(module: str, root: Path | None) -> bool:
    loaded = sys.modules.get(module)
    if loaded is not None and root is None:
        return (getattr(loaded, "__file__", None) or "").endswith(EXTENSION_SUFFIX)
    return compiled_path(module, root).exists()


def check(root: Path | None = None) -> None:
    """Raise :class:`StaleCompiledCore` when a compiled module would run outdated rules."""
    changed = stale(root)
    if changed:
        raise StaleCompiledCore(
            f"the compiled core is older than its source ({', '.join(changed)}): run "
            "`make install` to rebuild it, or `make interpreted` to run the Python source"
        )
