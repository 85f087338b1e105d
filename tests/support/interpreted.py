"""A pytest plugin that imports the core's Python source even where it is compiled.

``pytest -p tests.support.interpreted ...`` runs the tests against the interpreted core, as
it runs where no C compiler is installed (the Docker image), so that both forms of the core
pass the same tests in one ``make test``. Loaded with ``-p``, it is imported before any test
module, so no compiled module can have been imported before its finder is in place.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec
from types import ModuleType

from sluicegate import native


class SourceFirst(MetaPathFinder):
    """Finds each module of :data:`native.COMPILED` as its ``.py`` file."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname not in native.COMPILED:
            return None
        return importlib.util.spec_from_file_location(fullname, native.source_path(fullname))


sys.meta_path.insert(0, SourceFirst())  # once: a module is imported once per process
