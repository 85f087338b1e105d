"""A free local TCP port, for servers and dead addresses the tests point at."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port nothing listens on at the moment of the call (the OS picked it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive ports nothing listens on at the moment of the call."""
    for _ in range(200):
        first = free_port()
        if first + count > 65536:
            continue
        held = []
        try:
            for port in range(first, first + count):
                s = socket.socket()
                held.append(s)
                s.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
        finally:
            for s in held:
                s.close()
    raise RuntimeError(f"no {count} consecutive free ports found")
