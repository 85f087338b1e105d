"""The exception root of the ``consumers`` package (ingest, workers, gateway, venues).

Each area below ``consumers`` derives its own root from :class:`ConsumersError`, so the CLI
can print any of them as an operator-facing message with one ``except``.
"""

from __future__ import annotations


class ConsumersError(Exception):
    """Base of every error the consumers package raises on purpose; messages say what to do."""
