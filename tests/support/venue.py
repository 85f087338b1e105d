"""The paper venue as a real process for tests: start, kill -9, restart, admin and raw calls.

Each venue runs ``sluicegate venue`` on a free port with its own state directory and config,
and is ended by its pid. :meth:`VenueProcess.binance_raw` sends hand-signed Binance requests so
tests can check wire shapes and error codes the adapters hide.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from consumers.venue.adapter import Attempt, VenueAdapter
from consumers.venue.binance_spot import BinanceSpotClient
from consumers.venue.paper import PaperVenueClient
from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
API_KEY = "alice-key"
API_SECRET = "alice-secret"
ADMIN_TOKEN = "test-admin-token"

CONFIG = f"""
admin_token = "{ADMIN_TOKEN}"
maker_commission = "0.001"
taker_commission = "0.002"

[[symbols]]
symbol = "BTCUSDT"
base = "BTC"
quote = "USDT"
price = "50000.00"
tick_size = "0.01"
step_size = "0.00001"
min_notional = "5"

[[symbols]]
symbol = "ETHUSDT"
base = "ETH"
quote = "USDT"
price = "2500.00"
tick_size = "0.01"
step_size = "0.0001"

[[accounts]]
name = "alice"
api_key = "{API_KEY}"
api_secret = "{API_SECRET}"
balances = {{ USDT = "100000", BTC = "2" }}

[[accounts]]
name = "bob"
api_key = "bob-key"
api_secret = "bob-secret"
balances = {{ USDT = "500" }}
"""


def now_attempt(window_ms: int = 5000) -> Attempt:
    return Attempt(time.time_ns() // 1_000_000, window_ms)


@dataclass
class VenueProcess:
    """One venue process (restartable on the same state and port)."""

    state_dir: Path
    config_path: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 30.0) -> None:
        self.log_path = self.state_dir.parent / f"venue-{self.port}.log"
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sluicegate.cli",
                "venue",
                "--http",
                f"127.0.0.1:{self.port}",
                "--state-dir",
                str(self.state_dir),
                "--config",
                str(self.config_path),
            ],
            cwd=ROOT,
            stdout=log,
            stderr=log,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        log.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"venue exited with {self.process.returncode}: {self.log()}")
            try:
                if self.admin("GET", "/paper/v1/health")[0] == 200:
                    return
            except OSError:
                time.sleep(0.05)
        raise TimeoutError(f"venue did not start: {self.log()}")

    def log(self) -> str:
        return self.log_path.read_text() if self.log_path and self.log_path.exists() else ""

    def stop(self) -> int:
        """SIGTERM by pid, then SIGKILL after 10 s; the exit code."""
        assert self.process is not None
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait()
        return self.process.returncode

    def kill9(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait()

    # -- calls -------------------------------------------------------------------------------

    def _http(
        self, method: str, target: str, body: bytes | None, headers: dict[str, str], timeout: float
    ) -> tuple[int, Any]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request(method, target, body=body, headers=headers)
            response = conn.getresponse()
            data = response.read()
        finally:
            conn.close()
        return response.status, json.loads(data) if data else None

    def admin(self, method: str, path: str, body: object = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}", "Content-Type": "application/json"}
        return self._http(method, path, data, headers, 10)

    def admin_ok(self, method: str, path: str, body: object = None) -> Any:
        status, answer = self.admin(method, path, body)
        assert status in (200, 201), (status, answer)
        return answer

    def reset(self) -> None:
        self.admin_ok("POST", "/paper/v1/reset")

    def fault(self, **spec: object) -> dict[str, Any]:
        answer = self.admin_ok("POST", "/paper/v1/faults", spec)
        return dict(answer["faults"][0])

    def set_price(self, symbol: str, price: str, volume: str | None = None) -> list[Any]:
        body: dict[str, str] = {"symbol": symbol, "price": price}
        if volume is not None:
            body["volume"] = volume
        return list(self.admin_ok("POST", "/paper/v1/prices", body)["fills"])

    def orders(self, client_order_id: str | None = None) -> list[dict[str, Any]]:
        path = "/paper/v1/orders"
        if client_order_id is not None:
            path += f"?{urlencode({'client_order_id': client_order_id})}"
        return list(self.admin_ok("GET", path)["orders"])

    def balances(self, account: str = "alice") -> dict[str, tuple[Decimal, Decimal]]:
        """``asset -> (free, locked)`` from the admin API."""
        rows = self.admin_ok("GET", "/paper/v1/balances")["balances"].get(account, [])
        return {b["asset"]: (Decimal(b["free"]), Decimal(b["locked"])) for b in rows}

    def binance_raw(
        self,
        method: str,
        path: str,
        params: list[tuple[str, str]],
        *,
        key: str | None = API_KEY,
        secret: str = API_SECRET,
        timestamp_ms: int | None = None,
        recv_window: str | None = None,
        in_body: bool = False,
        sign: bool = True,
    ) -> tuple[int, Any]:
        """A hand-signed Binance request (parameters in the query string, or the body)."""
        all_params = list(params)
        if recv_window is not None:
            all_params.append(("recvWindow", recv_window))
        all_params.append(("timestamp", str(timestamp_ms or time.time_ns() // 1_000_000)))
        query = urlencode(all_params)
        if sign:
            query += (
                "&signature="
                + hmac.new(secret.encode(), query.encode(), hashlib.sha256).hexdigest()
            )
        headers = {} if key is None else {"X-MBX-APIKEY": key}
        if in_body:
            headers["Content-Type"] = "application/x-www-form-urlencoded"
            return self._http(method, path, query.encode(), headers, 10)
        return self._http(method, f"{path}?{query}", None, headers, 10)

    def adapter(self, kind: str, read_timeout_s: float = 5.0) -> VenueAdapter:
        if kind == "binance":
            return BinanceSpotClient(
                self.base_url, API_KEY, API_SECRET, read_timeout_s=read_timeout_s
            )
        return PaperVenueClient(self.base_url, API_KEY, API_SECRET, read_timeout_s=read_timeout_s)


@contextmanager
def running_venue(directory: Path, config: str = CONFIG) -> Iterator[VenueProcess]:
    """A started venue in ``directory`` (state in ``directory/state``), stopped afterwards."""
    config_path = directory / "venue.toml"
    config_path.write_text(config)
    venue = VenueProcess(directory / "state", config_path)
    venue.start()
    try:
        yield venue
    finally:
        venue.stop()
