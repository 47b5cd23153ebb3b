"""The work queue of a local world: the ``messages`` table, claimed in the order of
``ordering`` (priority levels with aging, then fair tags within a level), settled only by the
claim's holder, and the ``dead_letters`` table.

In-process wake-ups: an enqueue wakes consumers of the same file in this process at once;
other processes notice within the poll interval (``changes``)."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..._core import clock, jsoncodec, ordering
from ..._core.ids import MessageId
from ...telemetry import carry
from ...world import Delivery, QueueDepth, entries
from ...world.routing import plain_topic
from .changes import Changes, Seen
from .holders import holder_alive

_LEVELS = range(ordering.MIN_PRIORITY, ordering.MAX_PRIORITY + 1)
_OLDEST_PER_LEVEL = "SELECT " + ", ".join(
    "(SELECT ready_at FROM messages WHERE topic = ?1 AND level = "
    f"{level} AND +available_at <= ?2 ORDER BY ready_at LIMIT 1)"
    for level in _LEVELS
)
"""Per priority level, when its longest-waiting ready message became ready (NULL: none
ready): a column a level, each a walk down messages_aging, in one statement."""

# In-process wake-ups: an enqueue wakes consumers of the same file in this process at once;
# other processes notice within the poll interval. Keyed by resolved path.
_WAKERS: dict[str, set[asyncio.Event]] = {}
# Commits by other processes: one receiver of the file per process looks for them.
_CHANGES: dict[str, Changes] = {}


_RECLAIM_EVERY = 1.0  # seconds between scans for messages held by dead local processes


class LocalQueue:
    def __init__(
        self,
        write: Callable[..., Any],
        write_unsynced: Callable[..., Any],
        read: Callable[..., list[Any]],
        *,
        holder: str,
        visibility: float,
        aging: float,
        poll: float,
        now: Callable[[], float],
    ) -> None:
        self._write = write
        self._write_unsynced = write_unsynced
        self._read = read
        self._holder = holder
        self._visibility = visibility
        self._aging = aging
        self._poll = poll
        self.now = now
        self._last_reclaim = 0.0
        self._key = ""

    def start(self, key: str) -> None:
        """The file is open: ``key`` (its resolved path) names its in-process wakers."""
        self._key = key
        self._reclaim_dead_holders()

    async def enqueue(
        self,
        topic: str,
        payload: Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
        delay_seconds: float = 0.0,
        recoverable: bool = False,
    ) -> MessageId:
        # The run's ordering is on the payload already when it has one: the sender puts it
        # there (``world.sending``), and the world stores what it is given.
        stored = carry(payload)
        body = jsoncodec.dumps(stored)
        now = clock.now()
        write = self._write_unsynced if recoverable else self._write
        message_id: MessageId = write(
            self._enqueue_tx,
            topic,
            body,
            idempotency_key,
            now + max(0.0, delay_seconds),
            now,
            ordering.of_payload(stored),
        )
        self.wake()
        return message_id

    def _enqueue_tx(
        self,
        db: sqlite3.Connection,
        topic: str,
        body: bytes,
        key: str | None,
        available_at: float,
        now: float,
        order: ordering.Ordering,
    ) -> MessageId:
        # The message's fair tag (ordering.FairClock.tag, in two tables) is the later of the
        # topic's clock and its key's last finish. It is worked out inside the INSERT, so an
        # enqueue costs one statement less; the statement's own RETURNING hands it back.
        row = db.execute(
            "INSERT INTO messages (topic, payload, idem_key, available_at, created_at, level, "
            "ready_at, fair_tag) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?4, MAX("
            "COALESCE((SELECT vtime FROM fair_clock WHERE topic = ?1), 0), "
            "COALESCE((SELECT finish FROM fair_flows WHERE topic = ?1 AND key = ?7), 0))) "
            "ON CONFLICT (idem_key) DO NOTHING RETURNING id, fair_tag",
            (topic, body, key, available_at, now, order.priority, order.fairness_key),
        ).fetchone()
        if row is None:  # the key is held by a stored or in-flight message: dedupe to it
            row = db.execute("SELECT id FROM messages WHERE idem_key = ?", (key,)).fetchone()
        else:
            db.execute(
                "INSERT INTO fair_flows (topic, key, finish) VALUES (?,?,?) "
                "ON CONFLICT (topic, key) DO UPDATE SET finish = excluded.finish",
                (topic, order.fairness_key, float(row[1]) + 1.0 / order.fairness_weight),
            )
        return MessageId(str(row[0]))

    async def receive(
        self, topic: str, *, max_messages: int = 1, wait_seconds: float = 1.0
    ) -> list[Delivery]:
        deadline = time.monotonic() + wait_seconds
        waker = asyncio.Event()
        _WAKERS.setdefault(self._key, set()).add(waker)
        changes = _CHANGES.setdefault(self._key, Changes())
        try:
            while True:
                if time.monotonic() - self._last_reclaim > _RECLAIM_EVERY:
                    self._reclaim_dead_holders()
                # Both before the reads, so that a commit between them and the wait below is a
                # change the wait sees (``changes``), and an enqueue of this process then is a
                # wake it keeps.
                waker.clear()
                seen = Seen(self._data_version(), clock.offset())
                # A read first: idle consumers (every worker polls two topics) must not take
                # the database's write lock just to find nothing due.
                due = self._read(
                    "SELECT 1 FROM messages WHERE topic = ? AND available_at <= ? LIMIT 1",
                    (topic, clock.now()),
                )
                got: list[Delivery] = (
                    self._write_unsynced(self._claim_tx, topic, max_messages) if due else []
                )
                if got:
                    return got
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return []
                rows = self._read(
                    "SELECT MIN(available_at) FROM messages WHERE topic = ?", (topic,)
                )
                nap = remaining
                if rows and rows[0][0] is not None:
                    nap = min(nap, max(0.0, rows[0][0] - clock.now()) + 0.001)
                await changes.wait(
                    waker,
                    lambda: _WAKERS.get(self._key, ()),
                    seen,
                    self._data_version,
                    self._poll,
                    nap,
                )
        finally:
            _WAKERS[self._key].discard(waker)

    def _data_version(self) -> int:
        """Changes when another connection commits to the file (``changes``)."""
        return int(self._read("PRAGMA data_version")[0][0])

    def _claim_tx(self, db: sqlite3.Connection, topic: str, limit: int) -> list[Delivery]:
        now = clock.now()
        # Rule 1 of ordering: each level's longest-waiting ready message, from messages_aging
        # (one short index walk per level: held messages are the only rows skipped), all
        # levels in one statement rather than one statement a level.
        row = db.execute(_OLDEST_PER_LEVEL, (topic, now)).fetchone()
        oldest = {level: at for level, at in zip(_LEVELS, row, strict=True) if at is not None}
        picked: list[Any] = []
        for level in ordering.level_order(oldest, now, self._aging):
            # Rule 2 within the level, down messages_order; the unary + keeps the planner off
            # messages_due, whose range would need every due message sorted.
            picked += db.execute(
                "SELECT id, available_at, fair_tag FROM messages WHERE topic = ? AND level = ? "
                "AND +available_at <= ? ORDER BY fair_tag, id LIMIT ?",
                (topic, level, now, limit - len(picked)),
            ).fetchall()
            if len(picked) >= limit:
                break
        if not picked:
            return []
        due = {r[0]: r[1] for r in picked}
        served = max(r[2] for r in picked)
        db.execute(
            "INSERT INTO fair_clock (topic, vtime) VALUES (?,?) "
            "ON CONFLICT (topic) DO UPDATE SET vtime = MAX(vtime, excluded.vtime)",
            (topic, served),
        )
        # a key whose finish the clock passed would start from the clock anyway
        db.execute(
            "DELETE FROM fair_flows WHERE topic = ? AND finish <= "
            "(SELECT vtime FROM fair_clock WHERE topic = ?)",
            (topic, topic),
        )
        marks = ",".join("?" * len(due))
        rows = db.execute(
            # a message still held (its holder died, or its visibility ran out) comes back as
            # a counted delivery, which ends a run of held hand-backs as a retry does (SET's
            # expressions read the row as it was: ``holder`` is the last claim's)
            "UPDATE messages SET attempts = attempts + 1, holder = ?, available_at = ?, "
            "held_handbacks = CASE WHEN holder IS NULL THEN held_handbacks ELSE 0 END "
            f"WHERE id IN ({marks}) RETURNING id, attempts, payload, handbacks, held_handbacks",
            (self._holder, now + self._visibility, *due),
        ).fetchall()
        place = {r[0]: i for i, r in enumerate(picked)}
        rows.sort(key=lambda r: place[r[0]])  # a batch is handed out in the order picked
        return [
            Delivery(
                plain_topic(topic),
                MessageId(str(r[0])),
                r[1] - r[3],  # graceful hand-backs do not count against the budget
                _decode(r[2]),
                bytes(r[2]),
                (r[0], r[1]),  # the claim's attempt count fences every settlement
                due[r[0]],
                handbacks=r[3],
                held_handbacks=r[4],
            )
            for r in rows
        ]

    # A delivery is settled only by its holder: every settlement is fenced on the attempt
    # count the claim set, so A's late ack after B received the redelivery changes nothing.
    async def ack(self, delivery: Delivery) -> bool:
        return bool(self._settle("DELETE FROM messages WHERE id = ? AND attempts = ?", delivery))

    async def retry(self, delivery: Delivery, delay_seconds: float = 0.0) -> bool:
        at = clock.now() + max(0.0, delay_seconds)
        done = self._settle(
            "UPDATE messages SET available_at = ?1, ready_at = ?1, holder = NULL, "
            "held_handbacks = 0 WHERE id = ?2 AND attempts = ?3",
            delivery,
            at,
        )
        self.wake()
        return done

    async def release(
        self, delivery: Delivery, delay_seconds: float = 0.0, *, held: bool = False
    ) -> bool:
        # held_handbacks counts the hand-backs over a pause in a row: any other one ends it
        held_count = "held_handbacks + 1" if held else "0"
        done = self._settle(
            "UPDATE messages SET available_at = ?1, ready_at = ?1, holder = NULL, "
            f"handbacks = handbacks + 1, held_handbacks = {held_count} "
            "WHERE id = ?2 AND attempts = ?3",
            delivery,
            clock.now() + max(0.0, delay_seconds),
        )
        self.wake()
        return done

    async def cancel_delayed(self, message_id: MessageId) -> bool:
        """Delete the message's row while no claim has taken it (``attempts`` is 0): a claim
        and this delete are each one statement, so one of them wins, never both. Written
        without an fsync of its own, as a settlement is: a delete an OS crash loses only
        brings the message back, which its caller must bear anyway."""
        try:
            row_id = int(message_id)
        except ValueError:
            return False
        gone: int = self._write_unsynced(
            lambda db: (
                db.execute("DELETE FROM messages WHERE id = ? AND attempts = 0", (row_id,)).rowcount
            )
        )
        return gone > 0

    async def renew(self, delivery: Delivery) -> bool:
        at = clock.now() + self._visibility
        return self._settle(
            "UPDATE messages SET available_at = ? WHERE id = ? AND attempts = ?", delivery, at
        )

    def _settle(self, sql: str, delivery: Delivery, *before: Any) -> bool:
        params = (*before, *delivery.handle)
        changed: int = self._write_unsynced(lambda db: db.execute(sql, params).rowcount)
        return changed > 0

    async def dead_letter(self, delivery: Delivery, reason: str) -> bool:
        def tx(db: sqlite3.Connection) -> bool:
            gone = db.execute(
                "DELETE FROM messages WHERE id = ? AND attempts = ?",
                delivery.handle,
            ).rowcount
            if not gone:
                return False
            db.execute(
                "INSERT INTO dead_letters (message_id, topic, payload, attempts, reason, "
                "created_at) VALUES (?,?,?,?,?,?)",
                (
                    delivery.message_id,
                    delivery.topic,
                    delivery.raw,
                    delivery.attempt,
                    reason,
                    clock.now(),
                ),
            )
            return True

        done: bool = self._write(tx)
        return done

    async def runs_with_messages(self) -> set[str] | None:
        out: set[str] = set()
        for (raw,) in self._read("SELECT payload FROM messages", ()):
            try:
                payload = entries.loads(bytes(raw))
            except entries.Unreadable:  # dead-lettered when it is delivered
                continue
            if isinstance(payload, dict) and isinstance(payload.get("runId"), str):
                out.add(payload["runId"])
        return out

    async def queue_depths(self) -> list[QueueDepth] | None:
        # a held message's available_at is its visibility deadline: not ready until then
        rows = self._read(
            "SELECT topic, COUNT(*), MIN(available_at) FROM messages WHERE available_at <= ? "
            "GROUP BY topic ORDER BY topic",
            (self.now(),),
        )
        return [QueueDepth(str(r[0]), int(r[1]), float(r[2])) for r in rows]

    async def ready_messages(self, topics: Sequence[str]) -> dict[str, int]:
        # a held message's available_at is its holder's visibility deadline: not counted
        # until that lapses and it is due again
        return self._count_messages(topics, "available_at <= ?")

    async def in_flight_messages(self, topics: Sequence[str]) -> dict[str, int]:
        # A held message has a holder and its available_at is the holder's visibility
        # deadline; once that lapses the message is due again, so it counts as ready.
        return self._count_messages(topics, "holder IS NOT NULL AND available_at > ?")

    async def delayed_messages(self, topics: Sequence[str], before: float) -> dict[str, int]:
        # A message no one holds whose available_at is still ahead waits out a delay; a held
        # one's available_at is its holder's visibility deadline, so the holder rules it out.
        return self._count_messages(
            topics, "holder IS NULL AND available_at > ? AND available_at <= ?", before
        )

    def _count_messages(self, topics: Sequence[str], due: str, *more: float) -> dict[str, int]:
        """The messages of each of ``topics`` for which ``due`` (a condition on the world's
        time now, its first parameter, then ``more``) holds, every topic asked for in the
        answer."""
        out = dict.fromkeys(topics, 0)
        wanted = list(out)
        for start in range(0, len(wanted), 500):  # under SQLite's bound on parameters
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for topic, count in self._read(
                f"SELECT topic, COUNT(*) FROM messages WHERE topic IN ({marks}) AND {due} "
                "GROUP BY topic",
                (*chunk, clock.now(), *more),
            ):
                out[topic] = int(count)
        return out

    async def list_dead_letters(self, limit: int = 100) -> list[dict[str, Any]]:
        rows = self._read(
            "SELECT message_id, topic, payload, attempts, reason, created_at FROM dead_letters "
            "ORDER BY id DESC LIMIT ?",
            (limit,),
        )
        return [
            {
                "messageId": r[0],
                "topic": r[1],
                "payload": bytes(r[2]).decode(errors="replace"),
                "attempts": r[3],
                "reason": r[4],
                "createdAt": r[5],
            }
            for r in rows
        ]

    def wake(self) -> None:
        for waker in _WAKERS.get(self._key, ()):
            waker.set()

    def _reclaim_dead_holders(self) -> None:
        """Messages held by a process of this host that is gone come back now, not after the
        visibility timeout (the attempt was already counted when it was claimed)."""
        self._last_reclaim = time.monotonic()
        holders = [
            r[0]
            for r in self._read("SELECT DISTINCT holder FROM messages WHERE holder IS NOT NULL")
        ]
        dead = [h for h in holders if h != self._holder and not holder_alive(h)]
        for holder in dead:
            self._write(
                lambda db, h=holder: db.execute(
                    "UPDATE messages SET available_at = ?, holder = NULL, held_handbacks = 0 "
                    "WHERE holder = ?",
                    (clock.now(), h),
                )
            )
        if dead:
            self.wake()
        # A dead process's watch of every append would make each writer renumber the feed on
        # every append for nobody.
        followers = self._read("SELECT DISTINCT holder FROM feed_followers")
        for (holder,) in followers:
            if holder != self._holder and not holder_alive(holder):
                self._write(
                    lambda db, h=holder: db.execute(
                        "DELETE FROM feed_followers WHERE holder = ?", (h,)
                    )
                )


def _decode(raw: bytes) -> dict[str, Any] | None:
    try:
        value = jsoncodec.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return value if isinstance(value, dict) else None
