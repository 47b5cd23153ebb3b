"""A tiny fake payment provider that dedupes charges by idempotency key, as real ones do.

Charges live in a SQLite file next to the world (``payments.db`` beside the world's database,
or ``$WAYLINE_PAYMENTS_DB``), so the dedupe survives processes: a step retried by another
worker, after a crash, still gets the charge made the first time instead of a second one.

``lose_first_response`` makes the provider behave like a flaky network: the first request
for a key is charged, then its response is "lost" (:class:`GatewayTimeout`), so the caller
retries, and the retry must be answered with the same charge.
"""

from __future__ import annotations

import os
import sqlite3
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from wayline import Settings


class GatewayTimeout(Exception):
    """The request may or may not have gone through: retry with the same idempotency key."""


class IdempotencyKeyReused(Exception):
    """The same key was sent with different parameters (a bug in the caller)."""


@dataclass(frozen=True)
class Charge:
    charge_id: str
    idempotency_key: str
    customer: str
    amount_cents: int
    currency: str
    created_at: float


def default_path() -> Path:
    """``$WAYLINE_PAYMENTS_DB``, else next to the world's SQLite file, else ``.wayline``."""
    explicit = os.environ.get("WAYLINE_PAYMENTS_DB")
    if explicit:
        return Path(explicit)
    url = Settings.from_env().world_url
    if url.startswith("sqlite:///") and len(url) > len("sqlite:///"):
        return Path(url[len("sqlite:///") :]).parent / "payments.db"
    return Path(".wayline") / "payments.db"


_SCHEMA = """
CREATE TABLE IF NOT EXISTS charges (
    idempotency_key TEXT PRIMARY KEY,
    charge_id TEXT NOT NULL,
    customer TEXT NOT NULL,
    amount_cents INTEGER NOT NULL,
    currency TEXT NOT NULL,
    created_at REAL NOT NULL,
    requests INTEGER NOT NULL DEFAULT 1,
    refunded_at REAL
);
"""


class FakePaymentProvider:
    def __init__(self, path: str | Path | None = None, *, lose_first_response: bool = False):
        self.path = Path(path) if path is not None else default_path()
        self.lose_first_response = lose_first_response

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=10, isolation_level=None)
        db.executescript(_SCHEMA)
        return db

    def charge(
        self, *, idempotency_key: str, customer: str, amount_cents: int, currency: str
    ) -> Charge:
        """Charge once per key: a repeated key returns the original charge."""
        db = self._connect()
        try:
            db.execute("BEGIN IMMEDIATE")
            row = db.execute(
                "SELECT charge_id, customer, amount_cents, currency, created_at, requests "
                "FROM charges WHERE idempotency_key = ?",
                (idempotency_key,),
            ).fetchone()
            if row is None:
                charge = Charge(
                    f"ch_{uuid.uuid4().hex[:16]}",
                    idempotency_key,
                    customer,
                    amount_cents,
                    currency,
                    time.time(),
                )
                db.execute(
                    "INSERT INTO charges (idempotency_key, charge_id, customer, amount_cents, "
                    "currency, created_at) VALUES (?,?,?,?,?,?)",
                    (
                        idempotency_key,
                        charge.charge_id,
                        customer,
                        amount_cents,
                        currency,
                        charge.created_at,
                    ),
                )
                db.execute("COMMIT")
                if self.lose_first_response:
                    raise GatewayTimeout(
                        f"no response from the payment gateway (charge {charge.charge_id} "
                        "was in fact made)"
                    )
                return charge
            if (row[1], row[2], row[3]) != (customer, amount_cents, currency):
                db.execute("ROLLBACK")
                raise IdempotencyKeyReused(
                    f"idempotency key {idempotency_key!r} was used for a different charge"
                )
            db.execute(
                "UPDATE charges SET requests = requests + 1 WHERE idempotency_key = ?",
                (idempotency_key,),
            )
            db.execute("COMMIT")
            return Charge(row[0], idempotency_key, row[1], row[2], row[3], row[4])
        finally:
            db.close()

    def refund(self, idempotency_key: str) -> bool:
        """Refund the charge made under ``idempotency_key``, once: True if this call refunded
        it, False if there was no such charge or it was already refunded."""
        db = self._connect()
        try:
            cur = db.execute(
                "UPDATE charges SET refunded_at = ? WHERE idempotency_key = ? "
                "AND refunded_at IS NULL",
                (time.time(), idempotency_key),
            )
            return cur.rowcount == 1
        finally:
            db.close()

    def refunded(self, idempotency_key: str) -> bool:
        db = self._connect()
        try:
            row = db.execute(
                "SELECT refunded_at FROM charges WHERE idempotency_key = ?", (idempotency_key,)
            ).fetchone()
        finally:
            db.close()
        return row is not None and row[0] is not None

    def charges(self, customer: str | None = None) -> list[tuple[Charge, int]]:
        """Every charge made (with how many requests asked for it), oldest first."""
        if not self.path.exists():
            return []
        db = self._connect()
        try:
            rows = db.execute(
                "SELECT charge_id, idempotency_key, customer, amount_cents, currency, "
                "created_at, requests FROM charges ORDER BY created_at"
            ).fetchall()
        finally:
            db.close()
        out = [(Charge(*r[:6]), int(r[6])) for r in rows]
        return [c for c in out if customer is None or c[0].customer == customer]
