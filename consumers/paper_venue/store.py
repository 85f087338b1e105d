"""The paper venue's durable state: one SQLite file in WAL mode with ``synchronous=FULL``.

Every change a request makes happens in one ``BEGIN IMMEDIATE`` transaction that is committed
(and, with ``synchronous=FULL``, fsynced) before the venue answers. So an answered order exists
after a ``kill -9`` of the venue or a power cut, and an order whose answer was never sent exists
too if its transaction committed. Amounts are stored as decimal strings, never floats.

The invariant "a client order id is unique among OPEN orders of an account and symbol" is
enforced by a partial unique index as well as by the engine: closed orders may share an id.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path

from consumers.paper_venue.errors import PaperVenueError
from consumers.paper_venue.rows import FaultRow, OrderRow, TradeRow, columns, from_sql, to_sql

SCHEMA_VERSION = 1

_ORDER_COLUMNS = columns(OrderRow)
_TRADE_COLUMNS = columns(TradeRow)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS orders (
    order_id INTEGER PRIMARY KEY AUTOINCREMENT,
    account TEXT NOT NULL,
    symbol TEXT NOT NULL,
    client_order_id TEXT NOT NULL,
    side TEXT NOT NULL,
    type TEXT NOT NULL,
    time_in_force TEXT NOT NULL,
    price TEXT NOT NULL,
    orig_qty TEXT NOT NULL,
    orig_quote_qty TEXT NOT NULL,
    executed_qty TEXT NOT NULL,
    cumm_quote_qty TEXT NOT NULL,
    status TEXT NOT NULL,
    time_ms INTEGER NOT NULL,
    update_time_ms INTEGER NOT NULL,
    visible_from_ms INTEGER NOT NULL,
    api TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS orders_open_client_id
    ON orders (account, symbol, client_order_id)
    WHERE status IN ('NEW', 'PARTIALLY_FILLED');
CREATE INDEX IF NOT EXISTS orders_client_id ON orders (account, symbol, client_order_id);
CREATE INDEX IF NOT EXISTS orders_resting ON orders (symbol, status);
CREATE TABLE IF NOT EXISTS trades (
    trade_id INTEGER PRIMARY KEY AUTOINCREMENT,
    order_id INTEGER NOT NULL REFERENCES orders (order_id),
    account TEXT NOT NULL,
    symbol TEXT NOT NULL,
    side TEXT NOT NULL,
    price TEXT NOT NULL,
    qty TEXT NOT NULL,
    quote_qty TEXT NOT NULL,
    commission TEXT NOT NULL,
    commission_asset TEXT NOT NULL,
    is_maker INTEGER NOT NULL,
    time_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS trades_order ON trades (order_id);
CREATE TABLE IF NOT EXISTS balances (
    account TEXT NOT NULL,
    asset TEXT NOT NULL,
    free TEXT NOT NULL,
    locked TEXT NOT NULL,
    PRIMARY KEY (account, asset)
);
CREATE TABLE IF NOT EXISTS prices (
    symbol TEXT PRIMARY KEY,
    price TEXT NOT NULL,
    update_time_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS faults (
    fault_id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL UNIQUE,
    spec TEXT NOT NULL,
    matched INTEGER NOT NULL DEFAULT 0,
    applied INTEGER NOT NULL DEFAULT 0,
    created_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


class Store:
    """Typed access to the state file. Single-threaded: the venue's event loop owns it."""

    def __init__(self, path: Path) -> None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(path, isolation_level=None)
        except (OSError, sqlite3.Error) as e:
            raise PaperVenueError(f"cannot open venue state {path}: {e}") from None
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._db.execute("PRAGMA busy_timeout=5000")
        version = int(self._db.execute("PRAGMA user_version").fetchone()[0])
        if version > SCHEMA_VERSION:
            raise PaperVenueError(
                f"venue state {path} has schema v{version}; this venue knows v{SCHEMA_VERSION}. "
                "Use a newer venue or another --state-dir."
            )
        self._db.executescript(_SCHEMA)
        self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        self.path = path

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """All-or-nothing: committed (and fsynced) on normal exit, rolled back on error."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    # -- meta --------------------------------------------------------------------------------

    def meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        self._db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    # -- prices and balances -----------------------------------------------------------------

    def price(self, symbol: str) -> Decimal | None:
        row = self._db.execute("SELECT price FROM prices WHERE symbol = ?", (symbol,)).fetchone()
        return None if row is None else Decimal(row[0])

    def prices(self) -> dict[str, tuple[Decimal, int]]:
        rows = self._db.execute("SELECT symbol, price, update_time_ms FROM prices ORDER BY symbol")
        return {str(s): (Decimal(p), int(t)) for s, p, t in rows}

    def set_price(self, symbol: str, price: Decimal, now_ms: int) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO prices (symbol, price, update_time_ms) VALUES (?, ?, ?)",
            (symbol, str(price), now_ms),
        )

    def balance(self, account: str, asset: str) -> tuple[Decimal, Decimal]:
        """``(free, locked)``; an asset never held is ``(0, 0)``."""
        row = self._db.execute(
            "SELECT free, locked FROM balances WHERE account = ? AND asset = ?", (account, asset)
        ).fetchone()
        return (Decimal(0), Decimal(0)) if row is None else (Decimal(row[0]), Decimal(row[1]))

    def set_balance(self, account: str, asset: str, free: Decimal, locked: Decimal) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO balances (account, asset, free, locked) VALUES (?, ?, ?, ?)",
            (account, asset, str(free), str(locked)),
        )

    def balances(self, account: str) -> list[tuple[str, Decimal, Decimal]]:
        rows = self._db.execute(
            "SELECT asset, free, locked FROM balances WHERE account = ? ORDER BY asset", (account,)
        )
        return [(str(a), Decimal(f), Decimal(lk)) for a, f, lk in rows]

    def all_balances(self) -> dict[str, list[tuple[str, Decimal, Decimal]]]:
        out: dict[str, list[tuple[str, Decimal, Decimal]]] = {}
        for account, asset, free, locked in self._db.execute(
            "SELECT account, asset, free, locked FROM balances ORDER BY account, asset"
        ):
            out.setdefault(str(account), []).append((str(asset), Decimal(free), Decimal(locked)))
        return out

    # -- orders ------------------------------------------------------------------------------

    def insert_order(self, o: OrderRow) -> int:
        """Store a new order, set and return its venue order id (ids are never reused)."""
        cursor = self._db.execute(
            f"INSERT INTO orders ({_ORDER_COLUMNS}) VALUES (NULL{', ?' * 16})", to_sql(o)[1:]
        )
        assert cursor.lastrowid is not None
        o.order_id = int(cursor.lastrowid)
        return o.order_id

    def update_order(self, o: OrderRow) -> None:
        """Write an order's execution state (quantities, status, update time)."""
        self._db.execute(
            "UPDATE orders SET executed_qty = ?, cumm_quote_qty = ?, status = ?, "
            "update_time_ms = ? WHERE order_id = ?",
            (str(o.executed_qty), str(o.cumm_quote_qty), o.status, o.update_time_ms, o.order_id),
        )

    def order(self, account: str, symbol: str, order_id: int) -> OrderRow | None:
        row = self._db.execute(
            f"SELECT {_ORDER_COLUMNS} FROM orders "
            "WHERE order_id = ? AND account = ? AND symbol = ?",
            (order_id, account, symbol),
        ).fetchone()
        return None if row is None else from_sql(OrderRow, row)

    def orders_with_client_id(self, account: str, symbol: str, client_id: str) -> list[OrderRow]:
        """Every order of the account and symbol with this client id, newest first."""
        rows = self._db.execute(
            f"SELECT {_ORDER_COLUMNS} FROM orders "
            "WHERE account = ? AND symbol = ? AND client_order_id = ? ORDER BY order_id DESC",
            (account, symbol, client_id),
        )
        return [from_sql(OrderRow, r) for r in rows]

    def open_orders(self, account: str, symbol: str | None) -> list[OrderRow]:
        where, args = "account = ?", [account]
        if symbol is not None:
            where, args = where + " AND symbol = ?", [*args, symbol]
        rows = self._db.execute(
            f"SELECT {_ORDER_COLUMNS} FROM orders WHERE {where} "
            "AND status IN ('NEW', 'PARTIALLY_FILLED') ORDER BY order_id",
            args,
        )
        return [from_sql(OrderRow, r) for r in rows]

    def resting_orders(self, symbol: str) -> list[OrderRow]:
        """Open orders of every account on ``symbol``, oldest first."""
        rows = self._db.execute(
            f"SELECT {_ORDER_COLUMNS} FROM orders WHERE symbol = ? "
            "AND status IN ('NEW', 'PARTIALLY_FILLED') ORDER BY order_id",
            (symbol,),
        )
        return [from_sql(OrderRow, r) for r in rows]

    def all_orders(
        self, *, account: str | None = None, symbol: str | None = None, client_id: str | None = None
    ) -> list[OrderRow]:
        """Every order ever accepted (the admin view), oldest first, optionally filtered."""
        clauses, args = [], []
        for column, value in (
            ("account", account),
            ("symbol", symbol),
            ("client_order_id", client_id),
        ):
            if value is not None:
                clauses.append(f"{column} = ?")
                args.append(value)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        rows = self._db.execute(
            f"SELECT {_ORDER_COLUMNS} FROM orders {where} ORDER BY order_id", args
        )
        return [from_sql(OrderRow, r) for r in rows]

    # -- trades ------------------------------------------------------------------------------

    def insert_trade(self, t: TradeRow) -> int:
        """Store a fill and return its trade id."""
        cursor = self._db.execute(
            f"INSERT INTO trades ({_TRADE_COLUMNS}) VALUES (NULL{', ?' * 11})", to_sql(t)[1:]
        )
        assert cursor.lastrowid is not None
        return int(cursor.lastrowid)

    def trades(
        self,
        *,
        account: str | None = None,
        symbol: str | None = None,
        order_ids: list[int] | None = None,
        from_id: int = 0,
        limit: int | None = None,
        visible_at_ms: int | None = None,
        since_ms: int | None = None,
        until_ms: int | None = None,
        newest: bool = False,
    ) -> list[TradeRow]:
        """Trades in id order, optionally for some orders only, or only of orders visible at
        ``visible_at_ms`` (see the quiet period in :mod:`consumers.paper_venue.engine`), or
        only those made from ``since_ms`` to ``until_ms`` (both included). With a ``limit``,
        the first ones, or the last ones if ``newest``."""
        clauses: list[str] = ["t.trade_id >= ?"]
        args: list[object] = [from_id]
        for column, value in (("t.account", account), ("t.symbol", symbol)):
            if value is not None:
                clauses.append(f"{column} = ?")
                args.append(value)
        if order_ids is not None:
            if not order_ids:
                return []
            clauses.append(f"t.order_id IN ({', '.join('?' * len(order_ids))})")
            args.extend(order_ids)
        if visible_at_ms is not None:
            clauses.append("o.visible_from_ms <= ?")
            args.append(visible_at_ms)
        for clause, bound in (("t.time_ms >= ?", since_ms), ("t.time_ms <= ?", until_ms)):
            if bound is not None:
                clauses.append(clause)
                args.append(bound)
        columns = ", ".join(f"t.{c.strip()}" for c in _TRADE_COLUMNS.split(","))
        sql = (
            f"SELECT {columns} FROM trades t JOIN orders o ON o.order_id = t.order_id "
            f"WHERE {' AND '.join(clauses)} ORDER BY t.trade_id"
        )
        if limit is None:
            return [from_sql(TradeRow, r) for r in self._db.execute(sql, args)]
        if newest:
            sql += " DESC"
        rows = [from_sql(TradeRow, r) for r in self._db.execute(f"{sql} LIMIT {int(limit)}", args)]
        return rows[::-1] if newest else rows

    # -- faults ------------------------------------------------------------------------------

    def insert_fault(self, name: str, spec: str, now_ms: int) -> int | None:
        """Store a fault rule; None if a rule with that name exists already."""
        cursor = self._db.execute(
            "INSERT OR IGNORE INTO faults (name, spec, created_ms) VALUES (?, ?, ?)",
            (name, spec, now_ms),
        )
        return None if cursor.rowcount == 0 else int(cursor.lastrowid or 0)

    def faults(self) -> list[FaultRow]:
        rows = self._db.execute(
            "SELECT fault_id, name, spec, matched, applied, created_ms FROM faults "
            "ORDER BY fault_id"
        )
        return [
            FaultRow(int(i), str(n), str(s), int(m), int(a), int(c)) for i, n, s, m, a, c in rows
        ]

    def count_fault(self, fault_id: int, matched: int, applied: int) -> None:
        self._db.execute(
            "UPDATE faults SET matched = ?, applied = ? WHERE fault_id = ?",
            (matched, applied, fault_id),
        )

    def delete_faults(self, fault_id: int | None = None) -> int:
        if fault_id is None:
            return self._db.execute("DELETE FROM faults").rowcount
        return self._db.execute("DELETE FROM faults WHERE fault_id = ?", (fault_id,)).rowcount

    # -- reset -------------------------------------------------------------------------------

    def wipe(self) -> None:
        """Remove every order, trade, balance, price and fault (ids keep increasing)."""
        for table in ("trades", "orders", "balances", "prices", "faults"):
            self._db.execute(f"DELETE FROM {table}")
