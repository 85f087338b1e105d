"""The probes of a component over HTTP: an engine instance (``processor``, ``gate``,
``gateway``), the projector or a branch worker.

``--health HOST:PORT`` (or ``$SLUICEGATE_HEALTH``) serves, on its own thread:

- ``GET /healthz``: 200 while the component is worth keeping, 503 when it is not (an engine
  instance stopped, or running with a loop that has not come round within its stall limit;
  a projector or a worker that is not alive by its own ``alive()``): restart it;
- ``GET /readyz``: 200 while it processes what arrives (an engine instance running, its
  partitions restored and consumed; a projector connected to PostgreSQL), 503 otherwise;
- ``GET /metrics``: an engine instance's counters, phase and input lag as Prometheus text,
  the projector's counts and lag, a worker's tasks and reports
  (``sluicegate/instance_metrics.py``);

each with the status as JSON (an engine's from ``streams/engine/status.py``: phase, how
long, why it is starting over, start-overs in a row, assigned partitions; the others' from
:class:`~sluicegate.probes.LoopProbes`). ``HEAD`` answers the same without
a body. Any other path is 404, any other method 405, a request the server cannot parse 400,
each in the contract's error shape (``{"error": {"code", "message", "problems"}}``) and
quoting none of the request; none of them touches the instance. At most
:data:`MAX_CONNECTIONS` connections are served at once (one more is closed unanswered), and
a client that stops sending is dropped after 10 s.
The listener serves probes and metrics and nothing else: bind it to loopback or a management
network.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sluicegate.errors import SluicegateError
from sluicegate.probes import Probes
from streams import exposition

log = logging.getLogger("sluicegate.health")


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``PORT`` alone means loopback); ValueError with the reason otherwise."""
    host, _, port = text.rpartition(":")
    try:
        number = int(port)
    except ValueError:
        raise ValueError(f"health address {text!r}: expected HOST:PORT") from None
    if not 0 <= number <= 65535:
        raise ValueError(f"health address {text!r}: port out of range")
    return (host.strip("[]") or "127.0.0.1"), number


MAX_CONNECTIONS = 16
"""Connections served at once; one more is closed unanswered. A thread serves each, so
without a limit a client opening connections by the thousand would take threads (and
memory) from the instance itself."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # closing never waits for a slow client's thread

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


class _Server6(_Server):
    address_family = socket.AF_INET6


class HealthServer:
    """Serves ``probes`` on ``address`` until :meth:`close`."""

    def __init__(self, probes: Probes, address: tuple[str, int]) -> None:
        self.probes = probes
        try:
            server = (_Server6 if ":" in address[0] else _Server)(address, _handler(probes))
        except OSError as e:
            raise SluicegateError(
                f"cannot serve the health probes on {address[0]}:{address[1]}: {e}; "
                "choose another --health address"
            ) from e
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, name="health", kwargs={"poll_interval": 0.5}
        )
        self._thread.daemon = True
        self._thread.start()

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


def _error(code: str, message: str) -> dict[str, object]:
    """The contract's error body (``{"error": {"code", "message", "problems"}}``)."""
    return {"error": {"code": code, "message": message, "problems": []}}


def _handler(probes: Probes) -> type[BaseHTTPRequestHandler]:
    class Probe(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "sluicegate-health"
        timeout = 10  # a client that stops sending mid-request holds its thread no longer
        # What a request too broken to name its version is answered as: with a status line
        # (the default, HTTP/0.9, would send the error page alone).
        default_request_version = "HTTP/1.0"

        def do_GET(self) -> None:
            self._answer(body=True)

        def do_HEAD(self) -> None:
            self._answer(body=False)

        def _answer(self, *, body: bool) -> None:
            path = self.path.split("?", 1)[0]
            text = probes.metrics() if path == "/metrics" else None
            if text is not None:
                self._send_bytes(HTTPStatus.OK, text.encode(), exposition.CONTENT_TYPE, body)
                return
            if path not in ("/healthz", "/readyz"):
                message = "no such probe: GET /healthz, /readyz or (an engine instance) /metrics"
                self._send(HTTPStatus.NOT_FOUND, _error("not_found", message), body)
                return
            good, described = probes.readyz() if path == "/readyz" else probes.healthz()
            self._send(HTTPStatus.OK if good else HTTPStatus.SERVICE_UNAVAILABLE, described, body)

        def _refuse(self) -> None:
            self.close_connection = True  # its body is not read: never parse it as a request
            answer = _error("method_not_allowed", "the probes answer GET and HEAD only")
            self._send(HTTPStatus.METHOD_NOT_ALLOWED, answer, True)

        do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse

        def send_error(
            self, code: int, message: str | None = None, explain: str | None = None
        ) -> None:
            """The server's own refusals (unparsable request line, headers too long...) in
            the contract's error shape like every other answer, the connection closed after.
            ``message`` is not used: the standard library's quotes the request's bytes."""
            self.close_connection = True
            known = HTTPStatus(code)
            reason = known.phrase.lower().replace(" ", "_").replace("-", "_")
            self._send(known, _error(reason, f"{known.phrase}: {known.description}"), True)

        def _send(self, code: HTTPStatus, payload: dict[str, object], body: bool) -> None:
            self._send_bytes(code, json.dumps(payload).encode() + b"\n", "application/json", body)

        def _send_bytes(self, code: HTTPStatus, data: bytes, kind: str, body: bool) -> None:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            if code == HTTPStatus.METHOD_NOT_ALLOWED:
                self.send_header("Allow", "GET, HEAD")
            self.end_headers()
            if body:
                self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            log.debug("%s: " + format, self.address_string(), *args)

    return Probe
