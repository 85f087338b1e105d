"""The paper venue's configuration: symbols, accounts, commissions, the admin token, faults.

A TOML file (``--config``) or the defaults below. Amounts are strings (``"97000.5"``): a TOML
float is refused because it is not exact. The file seeds the durable state the first time a
state directory is used (and again on ``POST /paper/v1/reset``); afterwards prices and balances
are whatever the venue's state says, so a restart never rewinds an account.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from consumers.paper_venue.errors import PaperVenueError
from consumers.paper_venue.money import is_multiple, parse_decimal

DEFAULT_HTTP = "127.0.0.1:8090"
DEFAULT_STATE_DIR = "var/venue"
ADMIN_TOKEN_ENV = "SLUICEGATE_VENUE_ADMIN_TOKEN"
ADMIN_TOKEN_FILE = "admin-token"
_EIGHT_DECIMALS = Decimal("0.00000001")


@dataclass(frozen=True)
class SymbolSpec:
    """A tradable pair with Binance's PRICE_FILTER, LOT_SIZE and NOTIONAL filters."""

    symbol: str
    base: str
    quote: str
    price: Decimal
    tick_size: Decimal
    step_size: Decimal
    min_qty: Decimal
    max_qty: Decimal
    min_notional: Decimal


@dataclass(frozen=True)
class AccountSpec:
    """An account, its API credentials and its starting balances."""

    name: str
    api_key: str
    api_secret: str
    balances: dict[str, Decimal]


@dataclass(frozen=True)
class VenueConfig:
    """Everything the venue needs besides its listen address and state directory."""

    symbols: dict[str, SymbolSpec]
    accounts: tuple[AccountSpec, ...]
    maker_commission: Decimal = Decimal("0.001")
    taker_commission: Decimal = Decimal("0.001")
    admin_token: str | None = None
    faults: tuple[dict[str, Any], ...] = field(default_factory=tuple)

    def account_by_key(self) -> dict[str, AccountSpec]:
        return {a.api_key: a for a in self.accounts}


def default_config() -> VenueConfig:
    """BTCUSDT and ETHUSDT, one account ``paper`` (key ``paper-api-key``, secret
    ``paper-api-secret``) with 100,000 USDT, 1 BTC and 10 ETH, 0.1% commissions."""
    return VenueConfig(
        symbols={
            "BTCUSDT": _symbol(
                {
                    "symbol": "BTCUSDT",
                    "base": "BTC",
                    "quote": "USDT",
                    "price": "97000.00",
                    "step_size": "0.00001",
                }
            ),
            "ETHUSDT": _symbol(
                {
                    "symbol": "ETHUSDT",
                    "base": "ETH",
                    "quote": "USDT",
                    "price": "3500.00",
                    "step_size": "0.0001",
                }
            ),
        },
        accounts=(
            AccountSpec(
                "paper",
                "paper-api-key",
                "paper-api-secret",
                {"USDT": Decimal("100000"), "BTC": Decimal("1"), "ETH": Decimal("10")},
            ),
        ),
    )


def load_config(path: Path | None) -> VenueConfig:
    """The configuration in ``path`` (TOML), or the defaults when ``path`` is None."""
    if path is None:
        return default_config()
    try:
        raw = path.read_bytes()
        data = tomllib.loads(raw.decode("utf-8"))
    except OSError as e:
        raise PaperVenueError(f"cannot read venue config {path}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        # The venue imports nothing of the product, so not streams.text's reader.
        line = raw.count(b"\n", 0, e.start) + 1
        raise PaperVenueError(
            f"venue config {path} is not UTF-8 text: byte 0x{raw[e.start]:02x} on line {line}; "
            "save it as UTF-8"
        ) from None
    except tomllib.TOMLDecodeError as e:
        raise PaperVenueError(f"venue config {path} is not valid TOML: {e}") from None
    try:
        return _parse(data)
    except PaperVenueError as e:
        raise PaperVenueError(f"venue config {path}: {e}") from None


def resolve_admin_token(config: VenueConfig, state_dir: Path) -> str:
    """The admin token: $SLUICEGATE_VENUE_ADMIN_TOKEN, else the config's, else one generated
    once and kept in ``<state-dir>/admin-token`` (mode 0600)."""
    token = os.environ.get(ADMIN_TOKEN_ENV) or config.admin_token
    if token:
        return token
    path = state_dir / ADMIN_TOKEN_FILE
    if path.exists():
        return path.read_text(encoding="utf-8").strip()
    token = os.urandom(24).hex()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(token + "\n")
    return token


def _parse(data: dict[str, Any]) -> VenueConfig:
    defaults = default_config()
    known = {"symbols", "accounts", "maker_commission", "taker_commission", "admin_token"}
    known.add("faults")
    _no_unknown(data, known, "top level")
    symbols = (
        {s.symbol: s for s in (_symbol(item) for item in _tables(data, "symbols"))}
        if "symbols" in data
        else defaults.symbols
    )
    accounts = (
        tuple(_account(item) for item in _tables(data, "accounts"))
        if "accounts" in data
        else defaults.accounts
    )
    keys = [a.api_key for a in accounts]
    if len(set(keys)) != len(keys):
        raise PaperVenueError("two accounts share an api_key")
    token = data.get("admin_token")
    if token is not None and (not isinstance(token, str) or not token):
        raise PaperVenueError("admin_token must be a non-empty string")
    return VenueConfig(
        symbols=symbols,
        accounts=accounts,
        maker_commission=_amount(data, "maker_commission", defaults.maker_commission),
        taker_commission=_amount(data, "taker_commission", defaults.taker_commission),
        admin_token=token,
        faults=tuple(_tables(data, "faults")),
    )


def _symbol(item: dict[str, Any]) -> SymbolSpec:
    _no_unknown(item, set(SymbolSpec.__dataclass_fields__), "a [[symbols]] table")
    for name in ("symbol", "base", "quote"):
        if not isinstance(item.get(name), str) or not item[name].isalnum():
            raise PaperVenueError(f"[[symbols]] needs '{name}' (letters and digits)")
    spec = SymbolSpec(
        symbol=item["symbol"].upper(),
        base=item["base"].upper(),
        quote=item["quote"].upper(),
        price=_amount(item, "price", None),
        tick_size=_amount(item, "tick_size", Decimal("0.01")),
        step_size=_amount(item, "step_size", Decimal("0.00001")),
        min_qty=_amount(item, "min_qty", None, default_from=item.get("step_size", "0.00001")),
        max_qty=_amount(item, "max_qty", Decimal("9000")),
        min_notional=_amount(item, "min_notional", Decimal("5")),
    )
    for name in ("tick_size", "step_size"):
        value: Decimal = getattr(spec, name)
        if value <= 0 or not is_multiple(value, _EIGHT_DECIMALS):
            raise PaperVenueError(f"{spec.symbol}: {name} must be positive with at most 8 decimals")
    if spec.price <= 0:
        raise PaperVenueError(f"{spec.symbol}: price must be positive")
    return spec


def _account(item: dict[str, Any]) -> AccountSpec:
    _no_unknown(item, {"name", "api_key", "api_secret", "balances"}, "an [[accounts]] table")
    for name in ("name", "api_key", "api_secret"):
        if not isinstance(item.get(name), str) or not item[name]:
            raise PaperVenueError(f"[[accounts]] needs a non-empty '{name}'")
    raw = item.get("balances", {})
    if not isinstance(raw, dict):
        raise PaperVenueError(f"account {item['name']}: balances must be a table")
    balances = {str(asset).upper(): _amount(raw, asset, None) for asset in raw}
    return AccountSpec(item["name"], item["api_key"], item["api_secret"], balances)


def _amount(
    table: dict[str, Any], name: str, default: Decimal | None, *, default_from: object = None
) -> Decimal:
    value = table.get(name, default_from)
    if value is None:
        if default is None:
            raise PaperVenueError(f"'{name}' is required")
        return default
    if isinstance(value, float):
        raise PaperVenueError(f"'{name}' = {value!r}: write amounts as strings (\"97000.5\")")
    parsed = parse_decimal(str(value)) if isinstance(value, str | int) else None
    if parsed is None:
        raise PaperVenueError(f"'{name}' = {value!r} is not a non-negative decimal")
    return parsed


def _tables(data: dict[str, Any], name: str) -> list[dict[str, Any]]:
    items = data.get(name, [])
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise PaperVenueError(f"'{name}' must be an array of tables ([[{name}]])")
    return items


def _no_unknown(table: dict[str, Any], known: set[str], where: str) -> None:
    unknown = sorted(set(table) - known)
    if unknown:
        raise PaperVenueError(f"unknown key(s) {', '.join(unknown)} in {where}")
