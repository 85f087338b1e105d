"""The exception root of the execution gateway (``consumers.gateway``)."""

from __future__ import annotations

from consumers.errors import ConsumersError


class GatewayError(ConsumersError):
    """Base of every error the gateway raises on purpose; the message says what to do."""
