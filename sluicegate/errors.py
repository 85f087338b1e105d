"""The exception root of the ``sluicegate`` package (composition root, settings, CLI)."""

from __future__ import annotations


class SluicegateError(Exception):
    """Base of every error the ``sluicegate`` package raises on purpose.

    The CLI prints the message to stderr and exits non-zero; messages say what to do.
    """
