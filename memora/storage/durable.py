"""The durable inbox and outbox: nothing the platform was told we received, and no reply that
exists, is lost to a crash or an outage.

- The inbox keeps each incoming update (the platform's own JSON, opaque here) from the moment it
  arrives until it has been handled. What is still pending at start-up is handled first. An update
  seen before is refused, so one delivered twice is handled once; its text is dropped as soon as
  it is handled (only the id stays, for that check).
- The outbox keeps each answer until the platform has accepted it, retried with backoff across
  restarts; a turn's `delivered_at` says whether its reply reached the chat.
- Replicas on one store (PostgreSQL): each process has an id and beats in `replicas` every few
  seconds; an inbox row names its owner, the replica handling it. A replica handles only its own
  rows and takes over (one compare-and-set per row) the pending rows of a replica whose beat is
  stale (killed, machine gone) or that left. A chat's update waits while an older one of the
  same chat is pending at another replica, so a chat's order holds across replicas too.
- Not only answers: each row has a `kind` the platform adapter sends by (an answer to an update,
  a reminder, a plain message, an edit of a message already sent), so everything the bot says in a
  chat is kept, ordered and retried the same way. A row that is useless late (a reminder once its
  day is over) carries `expires`: past it, the row is dropped unsent and recorded (`failed`, with
  the reason). A row can also be kept inside a caller's transaction (`keep`), so a reminder's
  once-a-day claim and the reminder itself are written together.
- A chat's answers are sent by one sender at a time, across every process on the store: the
  sender holds the chat's lease (a row in `outbox_leases`, taken with one atomic upsert, renewed
  while it sends, let go after). A sender that dies lets its lease expire, and another takes over.

Both are platform-neutral tables in the same SQLite file as the history; /forgetme deletes the
rows of the user. Hand-written: it is a few SQL statements over the store the product already has.
"""

from __future__ import annotations

import time
import uuid
import weakref
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from memora.clock import now as clock_now
from memora.clock import utcnow
from memora.storage.connection import Connection
from memora.storage.postgres import OUTBOX_LOCK_CLASS, chat_lock_key


@dataclass(frozen=True)
class Incoming:
    update_id: int
    payload: str
    chat_id: int | None = None


class Replicas:
    """This process among those on the store: its heartbeat, and who else is alive.

    A replica is alive while its last beat is newer than `stale` seconds (3 beats by default).
    One whose event loop stalls longer is taken for gone: the turn's `update_id` (unique in
    `turns`) and the outbox's one-answer-per-update still keep a message from being answered
    twice; only a command could run twice then."""

    def __init__(
        self, db: Connection, interval: float = 2.0, replica_id: str | None = None
    ) -> None:
        self.db = db
        self.id = replica_id or uuid.uuid4().hex[:16]  # short: logs hide 24+ char tokens
        self.interval = interval
        self.stale = 3 * interval
        self.live = 1  # replicas alive at the last beat, this one included

    def alive_after(self) -> float:
        """Beats after this unix time are alive ones."""
        return time.time() - self.stale

    async def beat(self) -> int:
        """Say this replica is alive; how many are (this one included)."""
        async with self.db.transaction() as db:
            await db.execute(
                "INSERT INTO replicas(replica_id, seen, started_at) VALUES (?,?,?) "
                "ON CONFLICT(replica_id) DO UPDATE SET seen=excluded.seen",
                (self.id, time.time(), utcnow()),
            )
            # Long gone replicas (a day without a beat) are only noise in this table.
            await db.execute("DELETE FROM replicas WHERE seen < ?", (time.time() - 86400,))
        async with self.db.db.execute(
            "SELECT COUNT(*) FROM replicas WHERE seen >= ?", (self.alive_after(),)
        ) as cur:
            row = await cur.fetchone()
        self.live = max(1, int(row[0]) if row else 1)
        return self.live

    async def leave(self) -> None:
        """A clean stop: what this replica still holds is taken over at once, not when stale."""
        async with self.db.transaction() as db:
            await db.execute("DELETE FROM replicas WHERE replica_id=?", (self.id,))


ANSWER = "answer"  # an update's answer, rendered by the platform adapter
REMINDER = "reminder"  # {"text"}: a practice reminder; refused for good → reminders off
WEEKLY = "weekly"  # {"text", "photo"}: the weekly report and its chart; refused → reports off
MESSAGE = "message"  # {"text", "buttons"}: a plain message to the chat
EDIT = "edit"  # {"message_id", "text", "buttons"}: a message already sent, shown anew
VOICE = "voice"  # a spoken answer (audio), after the written one


@dataclass(frozen=True)
class Kept:
    """One row to keep: what it is (`kind`), the body its sender reads, and when (unix time) it
    is no longer worth sending (None: never too late)."""

    body: str
    kind: str = ANSWER
    expires: float | None = None


@dataclass(frozen=True)
class Outgoing:
    id: int
    chat_id: int
    update_id: int | None
    body: str
    attempts: int
    next_at: float  # unix time of the next attempt
    kind: str = ANSWER
    user_id: int | None = None
    expires: float | None = None

    def expired(self, now: float | None = None) -> bool:
        return self.expires is not None and (time.time() if now is None else now) > self.expires


class Inbox:
    """Updates from arrival until handled."""

    def __init__(self, db: Connection) -> None:
        self.db = db

    async def add(
        self,
        update_id: int,
        chat_id: int | None,
        user_id: int | None,
        payload: str,
        owner: str | None = None,
    ) -> bool:
        """Keep an update as `owner`'s; False when it was seen before (handled, or pending)."""
        async with self.db.transaction() as db:
            cur = await db.execute(
                "INSERT OR IGNORE INTO inbox(update_id, chat_id, user_id, payload, received_at, "
                "owner) VALUES (?,?,?,?,?,?)",
                (update_id, chat_id, user_id, payload, utcnow(), owner),
            )
            return bool(cur.rowcount)

    async def pending(self, owner: str | None = None) -> list[Incoming]:
        """Updates received but not handled (with `owner`, only its own), oldest first."""
        mine = "" if owner is None else " AND owner=?"
        async with self.db.db.execute(
            "SELECT update_id, payload, chat_id FROM inbox WHERE done_at IS NULL"
            f"{mine} ORDER BY update_id",
            () if owner is None else (owner,),
        ) as cur:
            return [_incoming(r) for r in await cur.fetchall()]

    async def orphans(
        self, alive_after: float, update_id: int | None = None
    ) -> list[tuple[int, str, int | None]]:
        """(update_id, owner as `take` wants it, chat_id) of the pending rows whose owner is gone
        (none, no beat since `alive_after`, or left), oldest first; with `update_id`, that row
        only."""
        one = "" if update_id is None else " AND update_id=?"
        async with self.db.db.execute(
            "SELECT update_id, COALESCE(owner, ''), chat_id FROM inbox WHERE done_at IS NULL AND "
            "(owner IS NULL OR owner NOT IN (SELECT replica_id FROM replicas WHERE seen >= ?))"
            f"{one} ORDER BY update_id",
            (alive_after,) if update_id is None else (alive_after, update_id),
        ) as cur:
            return [
                (int(r[0]), str(r[1]), None if r[2] is None else int(r[2]))
                for r in await cur.fetchall()
            ]

    async def take(self, update_id: int, old_owner: str, owner: str) -> bool:
        """Make a pending row `owner`'s if it is still `old_owner`'s ('' for none): of replicas
        taking over the same row at once, one gets it."""
        async with self.db.transaction() as db:
            cur = await db.execute(
                "UPDATE inbox SET owner=? WHERE update_id=? AND done_at IS NULL "
                "AND COALESCE(owner, '')=?",
                (owner, update_id, old_owner),
            )
            return bool(cur.rowcount)

    async def behind_others(self, chat_id: int, update_id: int, owner: str) -> bool:
        """Whether an older update of the chat is pending at another replica (or at none)."""
        async with self.db.db.execute(
            "SELECT 1 FROM inbox WHERE chat_id=? AND update_id<? AND done_at IS NULL "
            "AND COALESCE(owner, '')<>? LIMIT 1",
            (chat_id, update_id, owner),
        ) as cur:
            return await cur.fetchone() is not None

    async def ready(self, owner: str) -> list[Incoming]:
        """`owner`'s pending updates that no other replica's older update of the chat holds up,
        oldest first."""
        async with self.db.db.execute(
            "SELECT i.update_id, i.payload, i.chat_id FROM inbox i WHERE i.done_at IS NULL "
            "AND i.owner=? AND NOT EXISTS (SELECT 1 FROM inbox o WHERE o.chat_id=i.chat_id "
            "AND o.update_id<i.update_id AND o.done_at IS NULL AND COALESCE(o.owner, '')<>?) "
            "ORDER BY i.update_id",
            (owner, owner),
        ) as cur:
            return [_incoming(r) for r in await cur.fetchall()]

    async def done(self, update_id: int) -> None:
        """Handled: forget its content, keep its id (a second delivery is then refused)."""
        async with self.db.transaction() as db:
            await db.execute(
                "UPDATE inbox SET done_at=?, payload='' WHERE update_id=?", (utcnow(), update_id)
            )

    async def prune(self, keep: timedelta = timedelta(days=2)) -> int:
        """Forget handled ids older than `keep` (Telegram redelivers for at most a day)."""
        cutoff = (clock_now() - keep).isoformat(timespec="seconds")
        async with self.db.transaction() as db:
            cur = await db.execute(
                "DELETE FROM inbox WHERE done_at IS NOT NULL AND done_at < ?", (cutoff,)
            )
            return cur.rowcount or 0


class Outbox:
    """Answers from creation until the platform has them."""

    def __init__(self, db: Connection) -> None:
        self.db = db

    async def put(
        self,
        chat_id: int,
        user_id: int | None,
        body: str,
        *,
        update_id: int | None = None,
        kind: str = ANSWER,
        expires: float | None = None,
    ) -> bool:
        """Keep an answer to deliver; False when this update has one already (one answer per
        update: a replayed update or an error notice after the reply adds nothing)."""
        return await self.put_all(chat_id, user_id, [Kept(body, kind, expires)], update_id)

    async def put_all(
        self, chat_id: int, user_id: int | None, rows: list[Kept], update_id: int | None = None
    ) -> bool:
        """Keep several rows for one chat at once, in this order (a tap's edit and the card
        after it); the first carries `update_id`. False, and nothing kept, when this update has
        an answer already."""
        async with self.db.transaction() as db:
            return await keep(db, self.db.dialect, chat_id, user_id, rows, update_id)

    async def pending(self, chat_id: int) -> list[Outgoing]:
        """The chat's undelivered answers, in the order they were made."""
        return [
            _outgoing(r)
            for r in await self.db.rows(
                "SELECT id, chat_id, update_id, body, attempts, next_at, kind, user_id, expires "
                "FROM outbox WHERE state='pending' AND chat_id=? ORDER BY id",
                (chat_id,),
            )
        ]

    async def chats_due(self, now: float | None = None) -> list[int]:
        """Chats whose oldest undelivered answer may be tried now."""
        rows = await self.db.rows(
            "SELECT chat_id, next_at FROM outbox WHERE id IN "
            "(SELECT MIN(id) FROM outbox WHERE state='pending' GROUP BY chat_id)"
        )
        moment = time.time() if now is None else now
        return [int(r[0]) for r in rows if float(r[1]) <= moment]

    async def next_due(self) -> float | None:
        row = await self.db.row("SELECT MIN(next_at) FROM outbox WHERE state='pending'")
        return None if row is None or row[0] is None else float(row[0])

    async def sent(self, item: Outgoing) -> None:
        """Delivered: drop its content and mark the turn it answers as delivered."""
        async with self.db.transaction() as db:
            await db.execute("UPDATE outbox SET state='sent', body='' WHERE id=?", (item.id,))
            if item.update_id is not None:
                await db.execute(
                    "UPDATE turns SET delivered_at=? WHERE update_id=?", (utcnow(), item.update_id)
                )

    async def retry_later(self, item: Outgoing, error: str, delay: float) -> None:
        async with self.db.transaction() as db:
            await db.execute(
                "UPDATE outbox SET attempts=attempts+1, next_at=?, last_error=? WHERE id=?",
                (time.time() + delay, error[:500], item.id),
            )

    async def lease(self, chat_id: int, holder: str, seconds: float) -> bool:
        """Hold the chat's sending for `seconds` from now (take it, or renew one's own); False
        while another holder's lease runs. One statement: of two senders, one gets it."""
        now = time.time()
        if self.db.dialect == "sqlite":
            return _in_process(self.db).take(chat_id, holder, now + seconds, now)
        async with self.db.transaction() as db:
            cur = await db.execute(
                "INSERT INTO outbox_leases(chat_id, holder, expires) VALUES (?,?,?) "
                "ON CONFLICT(chat_id) DO UPDATE SET holder=excluded.holder, "
                "expires=excluded.expires "
                "WHERE outbox_leases.expires < ? OR outbox_leases.holder = excluded.holder",
                (chat_id, holder, now + seconds, now),
            )
            return bool(cur.rowcount)

    async def unlease(self, chat_id: int, holder: str) -> None:
        """Let the chat's sending go (only one's own lease)."""
        if self.db.dialect == "sqlite":
            _in_process(self.db).give_back(chat_id, holder)
            return
        async with self.db.transaction() as db:
            await db.execute(
                "DELETE FROM outbox_leases WHERE chat_id=? AND holder=?", (chat_id, holder)
            )

    async def expired(self, item: Outgoing) -> None:
        """Too late to be worth sending (a reminder whose day is over): dropped, the reason
        kept on the row."""
        when = datetime.fromtimestamp(item.expires or 0, UTC).isoformat(timespec="seconds")
        async with self.db.transaction() as db:
            await db.execute(
                "UPDATE outbox SET state='failed', body='', last_error=? || last_error WHERE id=?",
                (f"expired: not delivered by {when}; last error: ", item.id),
            )

    async def failed(self, item: Outgoing, error: str) -> None:
        """The platform refuses it for good (the user blocked the bot, the chat is gone)."""
        async with self.db.transaction() as db:
            await db.execute(
                "UPDATE outbox SET state='failed', body='', last_error=? WHERE id=?",
                (error[:500], item.id),
            )


class _Leases:
    """The leases of one SQLite store, in memory: one process owns a SQLite file (replicas share
    PostgreSQL), so its senders need only agree among themselves, and a lease on disk cost two
    fsyncing commits for every answer sent. The same rules as the outbox_leases table."""

    def __init__(self) -> None:
        self.held: dict[int, tuple[str, float]] = {}  # chat → (holder, expires)

    def take(self, chat_id: int, holder: str, expires: float, now: float) -> bool:
        current = self.held.get(chat_id)
        if current is not None and current[1] >= now and current[0] != holder:
            return False
        self.held[chat_id] = (holder, expires)
        return True

    def give_back(self, chat_id: int, holder: str) -> None:
        current = self.held.get(chat_id)
        if current is not None and current[0] == holder:
            del self.held[chat_id]


_LEASES: weakref.WeakKeyDictionary[Connection, _Leases] = weakref.WeakKeyDictionary()


def _in_process(db: Connection) -> _Leases:
    leases = _LEASES.get(db)
    if leases is None:
        leases = _LEASES[db] = _Leases()
    return leases


def _incoming(row: object) -> Incoming:
    r = list(row)  # type: ignore[call-overload]
    return Incoming(int(r[0]), str(r[1]), None if r[2] is None else int(r[2]))


def _outgoing(row: object) -> Outgoing:
    r = list(row)  # type: ignore[call-overload]
    return Outgoing(
        int(r[0]),
        int(r[1]),
        r[2],
        str(r[3]),
        int(r[4]),
        float(r[5]),
        kind=str(r[6]),
        user_id=None if r[7] is None else int(r[7]),
        expires=None if r[8] is None else float(r[8]),
    )


async def keep(
    db: Any,
    dialect: str,
    chat_id: int,
    user_id: int | None,
    rows: list[Kept],
    update_id: int | None = None,
) -> bool:
    """Keep rows for a chat inside the caller's transaction `db` (so whatever else it writes,
    such as a reminder's claim, commits with them or not at all); the first row carries
    `update_id`. False, and nothing kept, when that update has an answer already.

    A chat's rows are kept one transaction at a time, so their ids follow the order they become
    visible: on PostgreSQL two replicas' inserts could otherwise commit out of id order, and a
    sender reading between them would send the later row first. (SQLite's BEGIN IMMEDIATE
    already makes writers take turns.)"""
    if dialect == "postgresql":
        await db.execute(
            "SELECT pg_advisory_xact_lock(?, ?)", chat_lock_key(chat_id, OUTBOX_LOCK_CLASS)
        )
    now = utcnow()
    for n, row in enumerate(rows):
        cur = await db.execute(
            "INSERT OR IGNORE INTO outbox(chat_id, user_id, update_id, body, created_at, kind, "
            "expires) VALUES (?,?,?,?,?,?,?)",
            (chat_id, user_id, update_id if n == 0 else None, row.body, now, row.kind, row.expires),
        )
        if n == 0 and not cur.rowcount:
            return False
    return True
