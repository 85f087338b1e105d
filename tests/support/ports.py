"""A free local TCP port, for servers and dead addresses the tests point at."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port nothing listens on at the moment of the call (the OS picked it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
