"""``python -m bench.interpreted ARGS``: ``sluicegate ARGS`` running the admission core from its
Python source although it is compiled, for section 1's side-by-side measure of what compiling
the core buys (the same records, the same run, the same machine).
"""

from __future__ import annotations

import sys

# Installs its finder when imported: before anything below imports the core.
import tests.support.interpreted  # noqa: F401
from sluicegate.cli import main

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
