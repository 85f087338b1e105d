"""A notification sink for drills: ``/paper/v1/notifications``, durable, with faults.

* ``POST /paper/v1/notifications`` with an ``Idempotency-Key`` header (1-128 printable ASCII
  characters) and a JSON object body: stored once per key. The first POST of a key answers
  201 ``{"notification_id", "idempotency_key", "received_at_ms", "duplicate": false}``, a
  repeated one 200 with ``"duplicate": true`` (and is counted in ``posts``). Fault rules with
  ``op`` ``notify`` (``client_order_id`` matches the key) drop, hold, fail or refuse it, as for
  orders.
* ``GET /paper/v1/notifications?idempotency_key=KEY``: that notification (200) or 404
  ``not_found``: what a gateway asks to reconcile a notification whose answer it lost.
* ``GET /paper/v1/notifications`` (admin token): every notification with its ``posts``.

Messages live in the venue's state file (table ``notifications``, its own connection): a
restarted venue keeps them.
"""

from __future__ import annotations

import hmac
import json
import sqlite3
from pathlib import Path
from typing import Any

from aiohttp import web

from consumers.paper_venue.context import Shaper, Venue
from consumers.paper_venue.faults import Fault

PATH = "/paper/v1/notifications"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS notifications (
    notification_id INTEGER PRIMARY KEY AUTOINCREMENT,
    idempotency_key TEXT NOT NULL UNIQUE,
    body TEXT NOT NULL,
    posts INTEGER NOT NULL,
    received_ms INTEGER NOT NULL
)
"""


def _problem(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"error": {"code": code, "message": message}}, status=status)


def _fault_answer(fault: Fault) -> web.StreamResponse:
    code = "outcome_unknown" if fault.status >= 500 else "request_rejected"
    return _problem(fault.status, code, fault.msg)


class NotificationSink:
    """The sink's routes over one venue (and its own connection to the state file)."""

    def __init__(self, venue: Venue, path: Path) -> None:
        self.venue = venue
        self._db = sqlite3.connect(path, isolation_level=None)
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute(_SCHEMA)
        self.shape = Shaper(venue, "native", _fault_answer)

    def routes(self) -> list[web.RouteDef]:
        return [web.post(PATH, self.post), web.get(PATH, self.get)]

    def close(self) -> None:
        self._db.close()

    def _row(self, key: str) -> dict[str, Any] | None:
        row = self._db.execute(
            "SELECT notification_id, idempotency_key, body, posts, received_ms "
            "FROM notifications WHERE idempotency_key = ?",
            (key,),
        ).fetchone()
        if row is None:
            return None
        return {
            "notification_id": str(row[0]),
            "idempotency_key": row[1],
            "body": json.loads(row[2]),
            "posts": row[3],
            "received_at_ms": row[4],
        }

    async def post(self, request: web.Request) -> web.StreamResponse:
        key = request.headers.get("Idempotency-Key", "")
        if not 0 < len(key) <= 128 or not key.isascii() or not key.isprintable():
            return _problem(400, "invalid_request", "send an Idempotency-Key of 1-128 characters")
        try:
            body = json.loads(await request.read())
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _problem(400, "invalid_request", "the body is not JSON")
        if not isinstance(body, dict):
            return _problem(400, "invalid_request", "the body must be a JSON object")
        decision = self.shape.decide(request, "notify", client_order_id=key)
        return await self.shape(request, decision, lambda: self._store(key, body), self._answer)

    def _store(self, key: str, body: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        now = self.venue.exchange.clock()
        self._db.execute("BEGIN IMMEDIATE")
        try:
            cursor = self._db.execute(
                "UPDATE notifications SET posts = posts + 1 WHERE idempotency_key = ?", (key,)
            )
            duplicate = cursor.rowcount > 0
            if not duplicate:
                self._db.execute(
                    "INSERT INTO notifications (idempotency_key, body, posts, received_ms) "
                    "VALUES (?, ?, 1, ?)",
                    (key, json.dumps(body, sort_keys=True), now),
                )
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        row = self._row(key)
        assert row is not None
        return row, duplicate

    @staticmethod
    def _answer(result: tuple[dict[str, Any], bool]) -> web.StreamResponse:
        row, duplicate = result
        shown = {k: row[k] for k in ("notification_id", "idempotency_key", "received_at_ms")}
        return web.json_response(
            {**shown, "duplicate": duplicate}, status=200 if duplicate else 201
        )

    async def get(self, request: web.Request) -> web.StreamResponse:
        key = request.query.get("idempotency_key")
        if key is not None:
            row = self._row(key)
            if row is None:
                return _problem(404, "not_found", f"no notification with key {key!r}")
            return web.json_response(row)
        given = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        if not hmac.compare_digest(given.encode(), self.venue.admin_token.encode()):
            return _problem(401, "unauthorized", "send Authorization: Bearer <admin token>")
        keys = [r[0] for r in self._db.execute("SELECT idempotency_key FROM notifications")]
        return web.json_response({"notifications": [self._row(k) for k in keys]})
