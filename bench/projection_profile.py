"""One catch-up of the live projector, or one rebuild, for py-spy (run by bench.projection).

``python -m bench.projection_profile live|rebuild`` with ``SLUICEGATE_TOPIC_PREFIX`` naming
the benchmark's topics; the live one projects into a scratch schema and drops it.
"""

from __future__ import annotations

import io
import sys

from projections.db import connect, drop_schema, schema_name
from projections.projector import Projector
from projections.rebuild import rebuild
from streams.settings import load_settings


def main() -> None:
    settings = load_settings()
    if sys.argv[1:] == ["rebuild"]:
        rebuild(settings, stream=io.StringIO(), show_progress=False, timeout_s=1800)
        return
    schema = schema_name(settings.topic_prefix) + "__profile"
    try:
        with Projector(settings, schema=schema) as projector:
            projector.run_until(timeout_s=1800)
    finally:
        with connect(settings.pg_dsn, autocommit=True) as conn:
            drop_schema(conn, schema)


if __name__ == "__main__":
    main()
