"""The ``ChatStore`` once for SQLite and PostgreSQL: the statements, the migrations and the
logic, on the core's SQL machinery (``lovia.stores.sql``).

Why it looks like this:

* Every operation is a *script* (a generator yielding ``(sql, params)``, sent each
  statement's result) run as one transaction by the core's drivers: ``SQLiteDatabase`` in a
  worker thread, ``PostgresDatabase`` on a psycopg pool. ``ChatSQL`` holds the statements,
  written once with ``?`` and ``{t}`` and rendered into the database's dialect and schema.
  What the dialects do differently is two words: the auto-increment key, and ``LIKE``
  (ASCII case-insensitive on SQLite) versus ``ILIKE``.
* Migrations are numbered steps recorded in ``chat_schema_version``. They run when the
  database is first opened, inside the core's schema transaction (``BEGIN IMMEDIATE`` on
  SQLite, an advisory lock on PostgreSQL), so two processes starting on one database
  migrate one after the other and the second finds nothing to do.
* ``SQLChatStore`` is the behaviour; ``SQLiteChatStore`` and ``PostgresChatStore`` only
  build the database and the core session and checkpointer beside it.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lovia.exceptions import StoreError, UserError
from lovia.stores.sql import Database, Script, Statements, encode_json, statement, storable_id

from ..eventlog import EventRecord, EventRetention
from .base import (
    RUN_SOURCES,
    RUN_STATUSES,
    ChatMeta,
    ChatStore,
    RunRecord,
    RunSource,
    RunStatus,
    ScheduleRow,
)

if TYPE_CHECKING:
    from lovia.checkpointer import Checkpointer
    from lovia.session import Session

__all__ = [
    "ChatSQL",
    "SCHEMA_VERSION",
    "SQLChatStore",
    "clean_text",
    "migrate",
    "store_from_url",
    "well_formed",
]

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 2
"""The version of the chat tables this lovia writes; a newer database is refused."""

_BATCH = 100
"""Event rows per INSERT statement (5 parameters each: well under SQLite's limit)."""

# Each step takes the database from the version before it to its own number. Step 1 is the
# first released schema (``IF NOT EXISTS``: a database made before the version table existed
# has it already); later steps only add.
_STEPS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE IF NOT EXISTS {t}chat_sessions (
            id TEXT PRIMARY KEY,
            agent TEXT NOT NULL,
            title TEXT NOT NULL,
            pinned INTEGER NOT NULL DEFAULT 0,
            created_at DOUBLE PRECISION NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL,
            active_run_id TEXT
        )""",
        """CREATE TABLE IF NOT EXISTS {t}run_events (
            id {serial},
            run_id TEXT NOT NULL,
            seq BIGINT NOT NULL,
            session_id TEXT NOT NULL,
            type TEXT NOT NULL,
            data TEXT NOT NULL,
            UNIQUE (run_id, seq)
        )""",
        "CREATE INDEX IF NOT EXISTS run_events_session ON {t}run_events (session_id, id)",
    ),
    (
        "ALTER TABLE {t}chat_sessions ADD COLUMN parent_id TEXT",
        "ALTER TABLE {t}chat_sessions ADD COLUMN title_provisional INTEGER NOT NULL DEFAULT 1",
        # A title written before titles could be generated is kept as the user saw it.
        "UPDATE {t}chat_sessions SET title_provisional = 0",
        "CREATE INDEX IF NOT EXISTS chat_sessions_parent ON {t}chat_sessions (parent_id)",
        """CREATE TABLE IF NOT EXISTS {t}chat_runs (
            run_id TEXT PRIMARY KEY,
            session_id TEXT NOT NULL,
            agent TEXT NOT NULL,
            source TEXT NOT NULL,
            status TEXT NOT NULL,
            started_at DOUBLE PRECISION NOT NULL,
            ended_at DOUBLE PRECISION,
            error TEXT,
            usage_json TEXT
        )""",
        "CREATE INDEX IF NOT EXISTS chat_runs_session ON {t}chat_runs (session_id, started_at)",
        "CREATE INDEX IF NOT EXISTS chat_runs_started ON {t}chat_runs (started_at)",
        """CREATE TABLE IF NOT EXISTS {t}chat_schedules (
            id TEXT PRIMARY KEY,
            agent TEXT NOT NULL,
            session_id TEXT,
            data TEXT NOT NULL,
            next_fire_at DOUBLE PRECISION,
            active INTEGER NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL
        )""",
        "CREATE INDEX IF NOT EXISTS chat_schedules_due ON {t}chat_schedules (active, next_fire_at)",
    ),
)
assert len(_STEPS) == SCHEMA_VERSION

_META = (
    "id, agent, title, pinned, created_at, updated_at, active_run_id, parent_id, title_provisional"
)
_RUN = "run_id, session_id, agent, source, status, started_at, ended_at, error, usage_json"
_SCHEDULE = "id, agent, session_id, data, next_fire_at, active, created_at, updated_at"


class ChatSQL:
    """The chat tables' SQL in one dialect and schema (see the module docstring)."""

    def __init__(self, sql: Statements) -> None:
        pg = sql.dialect == "postgresql"
        self._render = sql.render
        self.serial = "BIGSERIAL PRIMARY KEY" if pg else "INTEGER PRIMARY KEY AUTOINCREMENT"
        r = self.render
        self.create_version = r(
            "CREATE TABLE IF NOT EXISTS {t}chat_schema_version "
            "(id INTEGER PRIMARY KEY, version INTEGER NOT NULL)"
        )
        self.select_version = r("SELECT version FROM {t}chat_schema_version WHERE id = 1")
        self.upsert_version = r(
            "INSERT INTO {t}chat_schema_version (id, version) VALUES (1, ?) "
            "ON CONFLICT (id) DO UPDATE SET version = excluded.version"
        )
        self.steps = tuple(tuple(r(s) for s in step) for step in _STEPS)

        # chat metadata
        self.insert_session = r(
            "INSERT INTO {t}chat_sessions (id, agent, title, pinned, created_at, updated_at, "
            "parent_id, title_provisional) VALUES (?, ?, ?, 0, ?, ?, ?, 1) "
            "ON CONFLICT (id) DO NOTHING"
        )
        self.select_session = r(f"SELECT {_META} FROM {{t}}chat_sessions WHERE id = ?")
        order = " ORDER BY pinned DESC, updated_at DESC, id LIMIT ? OFFSET ?"
        self.list_sessions = r(f"SELECT {_META} FROM {{t}}chat_sessions" + order)
        like = "ILIKE" if pg else "LIKE"  # SQLite's LIKE ignores ASCII case already
        self.search_sessions = r(
            f"SELECT {_META} FROM {{t}}chat_sessions WHERE title {like} ? ESCAPE '\\'" + order
        )
        # the same without task sessions (the sidebar's list): left out before the page is cut
        top = "parent_id IS NULL"
        self.list_chats = r(f"SELECT {_META} FROM {{t}}chat_sessions WHERE {top}" + order)
        self.search_chats = r(
            f"SELECT {_META} FROM {{t}}chat_sessions WHERE {top} AND title {like} ? ESCAPE '\\'"
            + order
        )
        self.rename = r(
            "UPDATE {t}chat_sessions SET title = ?, title_provisional = 0, updated_at = ? "
            "WHERE id = ?"
        )
        self.pin = r("UPDATE {t}chat_sessions SET pinned = ?, updated_at = ? WHERE id = ?")
        self.touch = r("UPDATE {t}chat_sessions SET updated_at = ? WHERE id = ?")
        self.retitle = r(
            "UPDATE {t}chat_sessions SET title = ?, title_provisional = 0, updated_at = ? "
            "WHERE id = ? AND title = ? AND title_provisional = 1"
        )
        self.point = r("UPDATE {t}chat_sessions SET active_run_id = ?, updated_at = ? WHERE id = ?")
        self.point_if = r(
            "UPDATE {t}chat_sessions SET active_run_id = ?, updated_at = ? "
            "WHERE id = ? AND active_run_id = ?"
        )
        self.select_active = r("SELECT active_run_id FROM {t}chat_sessions WHERE id = ?")
        self.select_children = r(
            "SELECT id FROM {t}chat_sessions WHERE parent_id = ? ORDER BY created_at, id"
        )
        self.select_all_ids = r("SELECT id FROM {t}chat_sessions ORDER BY id")
        self.delete_session = r("DELETE FROM {t}chat_sessions WHERE id = ?")
        self.delete_all_sessions = r("DELETE FROM {t}chat_sessions")

        # the runs a session owns: its checkpoints go with it
        self.session_runs = r(
            "SELECT run_id FROM {t}chat_runs WHERE session_id = ? "
            "UNION SELECT DISTINCT run_id FROM {t}run_events WHERE session_id = ?"
        )
        self.all_runs = r(
            "SELECT run_id FROM {t}chat_runs UNION SELECT DISTINCT run_id FROM {t}run_events"
        )
        self.delete_session_events = r("DELETE FROM {t}run_events WHERE session_id = ?")
        self.delete_session_runs = r("DELETE FROM {t}chat_runs WHERE session_id = ?")
        self.delete_all_events = r("DELETE FROM {t}run_events")
        self.delete_all_runs = r("DELETE FROM {t}chat_runs")

        # the event log
        self.select_events = r(
            "SELECT seq, type, data FROM {t}run_events WHERE run_id = ? AND seq > ? ORDER BY seq"
        )
        self.last_seq = r("SELECT MAX(seq) FROM {t}run_events WHERE run_id = ?")
        self.latest_run = r(
            "SELECT run_id FROM {t}run_events WHERE session_id = ? ORDER BY id DESC LIMIT 1"
        )
        self.has_run = r("SELECT 1 FROM {t}run_events WHERE run_id = ? AND session_id = ? LIMIT 1")
        self.live_runs = r(
            "SELECT active_run_id FROM {t}chat_sessions WHERE active_run_id IS NOT NULL"
        )
        self.runs_newest_first = r(
            "SELECT run_id FROM {t}run_events WHERE session_id = ? GROUP BY run_id "
            "ORDER BY MAX(id) DESC"
        )
        self.delete_run_events = r("DELETE FROM {t}run_events WHERE run_id = ?")
        self.count_events = r("SELECT COUNT(*) FROM {t}run_events")
        self.runs_oldest_first = r(
            "SELECT run_id, COUNT(*) FROM {t}run_events GROUP BY run_id ORDER BY MAX(id)"
        )
        self.insert_events = self._insert_events(_BATCH)

        # run records
        self.upsert_run = r(
            f"INSERT INTO {{t}}chat_runs ({_RUN}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (run_id) DO UPDATE SET session_id = excluded.session_id, "
            "agent = excluded.agent, source = excluded.source, status = excluded.status, "
            "started_at = excluded.started_at, ended_at = excluded.ended_at, "
            "error = excluded.error, usage_json = excluded.usage_json"
        )
        self.finish_run = r(
            "UPDATE {t}chat_runs SET status = ?, error = ?, usage_json = ?, ended_at = ? "
            "WHERE run_id = ?"
        )
        self.sweep_runs = r(
            "UPDATE {t}chat_runs SET status = 'interrupted', ended_at = ? WHERE status = 'running'"
        )

        # schedules
        self.upsert_schedule = r(
            f"INSERT INTO {{t}}chat_schedules ({_SCHEDULE}) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (id) DO UPDATE SET agent = excluded.agent, "
            "session_id = excluded.session_id, data = excluded.data, "
            "next_fire_at = excluded.next_fire_at, active = excluded.active, "
            "updated_at = excluded.updated_at"
        )
        self.select_schedule = r(f"SELECT {_SCHEDULE} FROM {{t}}chat_schedules WHERE id = ?")
        self.delete_schedule = r("DELETE FROM {t}chat_schedules WHERE id = ?")
        self.due_schedules = r(
            f"SELECT {_SCHEDULE} FROM {{t}}chat_schedules WHERE active = 1 "
            "AND next_fire_at IS NOT NULL AND next_fire_at <= ? ORDER BY next_fire_at, id LIMIT ?"
        )
        self.claim_fire = r(
            "UPDATE {t}chat_schedules SET next_fire_at = ?, active = ?, updated_at = ? "
            "WHERE id = ? AND active = 1 AND next_fire_at = ?"
        )

    def render(self, text: str) -> str:
        """``text`` in this dialect: ``{serial}`` is the auto-increment key."""
        return self._render(text.replace("{serial}", self.serial))

    def _insert_events(self, rows: int) -> str:
        values = ", ".join(["(?, ?, ?, ?, ?)"] * rows)
        return self.render(
            f"INSERT INTO {{t}}run_events (run_id, seq, session_id, type, data) VALUES {values}"
        )

    def insert_events_of(self, rows: int) -> str:
        """The INSERT of ``rows`` event rows (``rows <= _BATCH``)."""
        return self.insert_events if rows == _BATCH else self._insert_events(rows)

    def select_runs(self, where: Sequence[str]) -> str:
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        return self.render(
            f"SELECT {_RUN} FROM {{t}}chat_runs{clause} "
            "ORDER BY started_at DESC, run_id DESC LIMIT ? OFFSET ?"
        )

    def select_schedules(self, where: Sequence[str]) -> str:
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        return self.render(
            f"SELECT {_SCHEDULE} FROM {{t}}chat_schedules{clause} ORDER BY created_at, id"
        )


def migrate(sql: Statements) -> Script[None]:
    """Bring the chat tables to ``SCHEMA_VERSION`` (run by the driver when it opens the
    database, in its schema transaction); ``StoreError`` for a newer database."""
    q = ChatSQL(sql)
    yield q.create_version, ()
    found = yield q.select_version, ()
    version = int(found.rows[0][0]) if found.rows else 0
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"the chat tables have schema version {version}, newer than this lovia "
            f"understands ({SCHEMA_VERSION})",
            hint="upgrade lovia-web to open this database, or point the server at another one",
        )
    if version == SCHEMA_VERSION:
        return
    for step in q.steps[version:]:
        for text in step:
            yield text, ()
    yield q.upsert_version, (SCHEMA_VERSION,)


# -- values in and out ----------------------------------------------------------------------


def well_formed(text: str) -> str:
    """``text`` as UTF-8 can carry it: surrogate pairs written as two code points join up
    again, and a lone surrogate becomes U+FFFD."""
    if text.isascii():
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def clean_text(text: str) -> str:
    """``text`` as every database can keep it: NUL removed, a lone surrogate replaced."""
    return well_formed(text.replace("\x00", ""))


def _require_id(name: str, value: object) -> None:
    if not storable_id(value):
        raise UserError(
            f"{name} must be a non-empty string without NUL or lone surrogates, got "
            f"{str(value)[:60]!r}",
            hint="use printable ids (a uuid hex, a slug); encode arbitrary keys first",
        )


def _require_count(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UserError(f"{name} must be an int >= 0, got {value!r}", hint="e.g. limit=50")


def _require_time(name: str, value: object, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise UserError(
            f"{name} must be a finite number of Unix seconds, got {value!r}",
            hint="pass time.time()-style floats",
        )


def _json(value: Any, what: str) -> str:
    try:
        return encode_json(value)
    except (TypeError, ValueError) as exc:
        raise UserError(f"{what} must be JSON-safe: {exc}", hint="store plain dicts") from exc


def _meta(row: Sequence[Any]) -> ChatMeta:
    return ChatMeta(
        row[0],
        row[1],
        row[2],
        bool(row[3]),
        float(row[4]),
        float(row[5]),
        row[6],
        row[7],
        bool(row[8]),
    )


def _event(run_id: str, seq: int, kind: str, text: Any) -> EventRecord:
    try:
        data = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise _bad_event(run_id, seq, f"invalid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise _bad_event(run_id, seq, "the data is not a JSON object")
    return EventRecord(run_id, int(seq), kind, data)


def _bad_event(run_id: str, seq: int, why: str) -> StoreError:
    return StoreError(
        f"event {seq} of run {run_id!r} in the chat store cannot be read: {why}",
        run_id=run_id,
        row=seq,
        hint="the run's event log is damaged: delete the chat (or that run's run_events "
        "rows); the transcript is stored apart and is untouched",
    )


def _run(row: Sequence[Any]) -> RunRecord:
    usage: dict[str, Any] | None = None
    if row[8] is not None:
        try:
            decoded = json.loads(row[8])
        except (TypeError, ValueError):
            decoded = None
        if isinstance(decoded, dict):
            usage = decoded
        else:
            logger.warning("run record %r: unreadable usage %.80r, listed as None", row[0], row[8])
    return RunRecord(
        row[0],
        row[1],
        row[2],
        row[3],
        row[4],
        float(row[5]),
        None if row[6] is None else float(row[6]),
        row[7],
        usage,
    )


def _schedule(row: Sequence[Any]) -> ScheduleRow:
    try:
        data = json.loads(row[3])
    except (TypeError, ValueError) as exc:
        raise _bad_schedule(row[0], f"invalid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise _bad_schedule(row[0], "the data is not a JSON object")
    return ScheduleRow(
        row[0],
        row[1],
        row[2],
        data,
        None if row[4] is None else float(row[4]),
        bool(row[5]),
        float(row[6]),
        float(row[7]),
    )


def _bad_schedule(schedule_id: str, why: str) -> StoreError:
    return StoreError(
        f"schedule {schedule_id!r} in the chat store cannot be read: {why}",
        row=schedule_id,
        hint="delete the schedule and create it again",
    )


def _schedules(rows: Sequence[Sequence[Any]]) -> list[ScheduleRow]:
    out = []
    for row in rows:
        try:
            out.append(_schedule(row))
        except StoreError as exc:
            logger.warning("skipping a schedule: %s", exc)
    return out


# -- the store ------------------------------------------------------------------------------


class SQLChatStore(ChatStore):
    """A ``ChatStore`` on one SQL ``Database`` (``SQLiteChatStore``, ``PostgresChatStore``):
    the chat tables live in ``db``; ``session`` and ``checkpointer`` are the core stores on
    the same database."""

    def __init__(
        self,
        db: Database,
        session: Session,
        checkpointer: Checkpointer,
        *,
        retention: EventRetention | None = None,
    ) -> None:
        self._db = db
        self._q = ChatSQL(db.sql)
        self.session = session
        self.checkpointer = checkpointer
        self.retention = retention or EventRetention()

    # -- chat metadata ---------------------------------------------------------------------

    async def create_session(
        self, session_id: str, *, agent: str, title: str, parent_id: str | None = None
    ) -> ChatMeta:
        _require_id("session_id", session_id)
        _require_id("agent", agent)
        if parent_id is not None:
            _require_id("parent_id", parent_id)
        now = time.time()
        row = (session_id, agent, clean_text(title), now, now, parent_id)

        def create() -> Script[ChatMeta]:
            yield self._q.insert_session, row
            found = yield self._q.select_session, (session_id,)
            return _meta(found.rows[0])

        return await self._db.write(create())

    async def get_session(self, session_id: str) -> ChatMeta | None:
        if not storable_id(session_id):
            return None
        return await self._db.read(self._get(session_id))

    def _get(self, session_id: str) -> Script[ChatMeta | None]:
        found = yield self._q.select_session, (session_id,)
        return _meta(found.rows[0]) if found.rows else None

    async def list_sessions(
        self, *, limit: int, offset: int, query: str | None = None, tasks: bool = True
    ) -> list[ChatMeta]:
        _require_count("limit", limit)
        _require_count("offset", offset)
        q = self._q
        if query:
            text = clean_text(query)
            escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            search = q.search_sessions if tasks else q.search_chats
            script = statement(search, f"%{escaped}%", limit, offset)
        else:
            script = statement(q.list_sessions if tasks else q.list_chats, limit, offset)
        return [_meta(row) for row in await self._db.read(_rows(script))]

    async def update_session(
        self, session_id: str, *, title: str | None = None, pinned: bool | None = None
    ) -> ChatMeta | None:
        if not storable_id(session_id):
            return None
        now = time.time()

        def update() -> Script[ChatMeta | None]:
            if title is not None:
                yield self._q.rename, (clean_text(title), now, session_id)
            if pinned is not None:
                yield self._q.pin, (int(bool(pinned)), now, session_id)
            if title is None and pinned is None:
                yield self._q.touch, (now, session_id)
            return (yield from self._get(session_id))

        return await self._db.write(update())

    async def set_title_if_unchanged(self, session_id: str, *, expected: str, title: str) -> bool:
        if not storable_id(session_id):
            return False
        args = (clean_text(title), time.time(), session_id, clean_text(expected))
        return await self._db.write(_changed(statement(self._q.retitle, *args)))

    async def set_active_run(
        self, session_id: str, run_id: str | None, *, expected: str | None = None
    ) -> bool:
        if not storable_id(session_id):
            return False
        if run_id is not None:
            _require_id("run_id", run_id)
        now = time.time()
        if expected is None:
            script = statement(self._q.point, run_id, now, session_id)
        elif not storable_id(expected):
            return False
        else:
            script = statement(self._q.point_if, run_id, now, session_id, expected)
        return await self._db.write(_changed(script))

    async def delete_session(self, session_id: str) -> bool:
        if not storable_id(session_id):
            return False
        removed = await self._db.write(self._delete_tree(session_id))
        if not removed:
            return False
        await self._forget(removed)
        return True

    def _delete_tree(self, session_id: str) -> Script[dict[str, set[str]]]:
        """Delete the chat and its task sessions (depth first); their ids, each with the
        runs whose checkpoints are to go."""
        q = self._q
        found = yield q.select_active, (session_id,)
        if not found.rows:
            return {}
        removed: dict[str, set[str]] = {}
        todo = [session_id]
        while todo:
            sid = todo.pop()
            if sid in removed:
                continue
            active = yield q.select_active, (sid,)
            runs = yield q.session_runs, (sid, sid)
            owned = {r[0] for r in runs.rows}
            if active.rows and active.rows[0][0]:
                owned.add(active.rows[0][0])
            removed[sid] = owned
            children = yield q.select_children, (sid,)
            todo.extend(r[0] for r in children.rows)
            yield q.delete_session, (sid,)
            yield q.delete_session_events, (sid,)
            yield q.delete_session_runs, (sid,)
        return removed

    async def task_sessions(self, session_id: str) -> list[str]:
        if not storable_id(session_id):
            return []
        return await self._db.read(self._descendants(session_id))

    def _descendants(self, session_id: str) -> Script[list[str]]:
        found: list[str] = []
        seen = {session_id}
        level = [session_id]
        while level:
            below: list[str] = []
            for sid in level:
                children = yield self._q.select_children, (sid,)
                below.extend(r[0] for r in children.rows if r[0] not in seen)
            seen.update(below)
            found.extend(below)
            level = below
        return found

    async def delete_all_sessions(self) -> list[str]:
        def delete() -> Script[tuple[list[str], set[str]]]:
            q = self._q
            ids = yield q.select_all_ids, ()
            live = yield q.live_runs, ()
            runs = yield q.all_runs, ()
            yield q.delete_all_sessions, ()
            yield q.delete_all_events, ()
            yield q.delete_all_runs, ()
            return [r[0] for r in ids.rows], {r[0] for r in live.rows} | {r[0] for r in runs.rows}

        ids, runs = await self._db.write(delete())
        for sid in ids:
            await self.session.clear(sid)
        for run_id in runs:
            await self.checkpointer.delete(run_id)
        return ids

    async def _forget(self, removed: dict[str, set[str]]) -> None:
        for sid, runs in removed.items():
            await self.session.clear(sid)
            for run_id in runs:
                await self.checkpointer.delete(run_id)

    async def rewind_session(self, session_id: str, *, keep_entries: int) -> int:
        rewind = getattr(self.session, "rewind", None)
        if rewind is None:
            raise UserError(
                f"the session store {type(self.session).__name__} cannot rewind",
                hint="use a lovia.stores session (they all implement rewind)",
            )
        if not storable_id(session_id):
            return 0
        removed: int = await rewind(session_id, keep_entries=keep_entries)
        if removed:
            await self._db.write(statement(self._q.touch, time.time(), session_id))
        return removed

    # -- the event log ---------------------------------------------------------------------

    async def append_events(self, session_id: str, records: Sequence[EventRecord]) -> None:
        _require_id("session_id", session_id)
        rows: list[tuple[Any, ...]] = []
        for r in records:
            _require_id("run_id", r.run_id)
            if isinstance(r.seq, bool) or not isinstance(r.seq, int) or r.seq < 1:
                raise UserError(f"seq must be an int >= 1, got {r.seq!r}", hint="number from 1")
            rows.append((r.run_id, r.seq, session_id, clean_text(r.type), _json(r.data, "data")))
        if not rows:
            return

        def insert() -> Script[None]:
            for start in range(0, len(rows), _BATCH):
                chunk = rows[start : start + _BATCH]
                yield self._q.insert_events_of(len(chunk)), tuple(v for row in chunk for v in row)

        await self._db.write(insert())

    async def read_events(self, run_id: str, *, after: int = 0) -> list[EventRecord]:
        if not storable_id(run_id):
            return []
        rows = await self._db.read(_rows(statement(self._q.select_events, run_id, after)))
        return [_event(run_id, seq, kind, data) for seq, kind, data in rows]

    async def last_seq(self, run_id: str) -> int:
        if not storable_id(run_id):
            return 0
        rows = await self._db.read(_rows(statement(self._q.last_seq, run_id)))
        return int(rows[0][0] or 0) if rows else 0

    async def latest_run(self, session_id: str) -> str | None:
        if not storable_id(session_id):
            return None
        rows = await self._db.read(_rows(statement(self._q.latest_run, session_id)))
        return str(rows[0][0]) if rows else None

    async def has_run(self, session_id: str, run_id: str) -> bool:
        if not (storable_id(session_id) and storable_id(run_id)):
            return False
        return bool(await self._db.read(_rows(statement(self._q.has_run, run_id, session_id))))

    async def prune_events(self, session_id: str) -> int:
        if not storable_id(session_id):
            return 0
        return await self._db.write(self._prune(session_id))

    def _prune(self, session_id: str) -> Script[int]:
        q = self._q
        keep, cap = self.retention.runs_per_session, self.retention.max_events
        live_rows = yield q.live_runs, ()
        live = {r[0] for r in live_rows.rows}
        runs = yield q.runs_newest_first, (session_id,)
        deleted = 0
        for (run_id,) in runs.rows[keep:]:
            if run_id not in live:
                gone = yield q.delete_run_events, (run_id,)
                deleted += gone.rowcount
        counted = yield q.count_events, ()
        total = int(counted.rows[0][0])
        if total > cap:
            oldest = yield q.runs_oldest_first, ()
            for run_id, count in oldest.rows:
                if total <= cap:
                    break
                if run_id in live:
                    continue
                yield q.delete_run_events, (run_id,)
                total -= int(count)
                deleted += int(count)
        return deleted

    # -- run records -----------------------------------------------------------------------

    async def record_run_started(self, record: RunRecord) -> None:
        _require_id("run_id", record.run_id)
        _require_id("session_id", record.session_id)
        _require_id("agent", record.agent)
        _check_run_values(record.source, record.status)
        _require_time("started_at", record.started_at)
        _require_time("ended_at", record.ended_at, optional=True)
        usage = None if record.usage is None else _json(record.usage, "usage")
        error = None if record.error is None else clean_text(record.error)
        row = (
            record.run_id,
            record.session_id,
            record.agent,
            record.source,
            record.status,
            record.started_at,
            record.ended_at,
            error,
            usage,
        )
        await self._db.write(statement(self._q.upsert_run, *row))

    async def record_run_finished(
        self,
        run_id: str,
        *,
        status: RunStatus,
        error: str | None = None,
        usage: dict[str, Any] | None = None,
        ended_at: float | None = None,
    ) -> None:
        if not storable_id(run_id):
            return
        _check_run_values("chat", status)
        _require_time("ended_at", ended_at, optional=True)
        encoded = None if usage is None else _json(usage, "usage")
        args = (
            status,
            None if error is None else clean_text(error),
            encoded,
            time.time() if ended_at is None else ended_at,
            run_id,
        )
        await self._db.write(statement(self._q.finish_run, *args))

    async def list_runs(
        self,
        *,
        session_id: str | None = None,
        source: RunSource | None = None,
        since: float | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> list[RunRecord]:
        _require_count("limit", limit)
        _require_count("offset", offset)
        _require_time("since", since, optional=True)
        where: list[str] = []
        args: list[Any] = []
        if session_id is not None:
            if not storable_id(session_id):
                return []
            where.append("session_id = ?")
            args.append(session_id)
        if source is not None:
            _check_run_values(source, "running")
            where.append("source = ?")
            args.append(source)
        if since is not None:
            where.append("started_at >= ?")
            args.append(since)
        script = statement(self._q.select_runs(where), *args, limit, offset)
        return [_run(row) for row in await self._db.read(_rows(script))]

    async def sweep_stale_runs(self) -> int:
        swept = statement(self._q.sweep_runs, time.time())
        return await self._db.write(_changed(swept, count=True))

    # -- schedules -------------------------------------------------------------------------

    async def save_schedule(self, row: ScheduleRow) -> None:
        _require_id("schedule id", row.id)
        _require_id("agent", row.agent)
        if row.session_id is not None:
            _require_id("session_id", row.session_id)
        if not isinstance(row.data, dict):
            raise UserError(
                f"schedule data must be a dict, got {type(row.data).__name__}",
                hint="keep the scheduler's fields in one JSON object",
            )
        _require_time("next_fire_at", row.next_fire_at, optional=True)
        _require_time("created_at", row.created_at)
        _require_time("updated_at", row.updated_at)
        values = (
            row.id,
            row.agent,
            row.session_id,
            _json(row.data, "schedule data"),
            row.next_fire_at,
            int(bool(row.active)),
            row.created_at,
            row.updated_at,
        )
        await self._db.write(statement(self._q.upsert_schedule, *values))

    async def get_schedule(self, schedule_id: str) -> ScheduleRow | None:
        if not storable_id(schedule_id):
            return None
        rows = await self._db.read(_rows(statement(self._q.select_schedule, schedule_id)))
        return _schedule(rows[0]) if rows else None

    async def list_schedules(
        self, *, agent: str | None = None, active: bool | None = None
    ) -> list[ScheduleRow]:
        where: list[str] = []
        args: list[Any] = []
        if agent is not None:
            if not storable_id(agent):
                return []
            where.append("agent = ?")
            args.append(agent)
        if active is not None:
            where.append("active = ?")
            args.append(int(bool(active)))
        script = statement(self._q.select_schedules(where), *args)
        return _schedules(await self._db.read(_rows(script)))

    async def delete_schedule(self, schedule_id: str) -> bool:
        if not storable_id(schedule_id):
            return False
        return await self._db.write(_changed(statement(self._q.delete_schedule, schedule_id)))

    async def due_schedules(self, now: float, *, limit: int = 100) -> list[ScheduleRow]:
        _require_time("now", now)
        _require_count("limit", limit)
        return _schedules(await self._db.read(_rows(statement(self._q.due_schedules, now, limit))))

    async def claim_fire(
        self, schedule_id: str, *, expected_next: float, next_fire_at: float | None, active: bool
    ) -> bool:
        if not storable_id(schedule_id):
            return False
        _require_time("expected_next", expected_next)
        _require_time("next_fire_at", next_fire_at, optional=True)
        args = (next_fire_at, int(bool(active)), time.time(), schedule_id, expected_next)
        return await self._db.write(_changed(statement(self._q.claim_fire, *args)))

    async def aclose(self) -> None:
        try:
            await self.session.aclose()  # type: ignore[attr-defined]
        finally:
            try:
                await self.checkpointer.aclose()  # type: ignore[attr-defined]
            finally:
                await self._db.close()


def _check_run_values(source: object, status: object) -> None:
    if source not in RUN_SOURCES:
        raise UserError(
            f"run source must be one of {', '.join(RUN_SOURCES)}, got {source!r}",
            hint="chat for a user's turn, schedule, subagent, resume",
        )
    if status not in RUN_STATUSES:
        raise UserError(
            f"run status must be one of {', '.join(RUN_STATUSES)}, got {status!r}",
            hint="a record starts running and ends completed, failed or cancelled",
        )


def _rows(script: Script[None]) -> Script[list[Any]]:
    """The rows the one statement of ``script`` returned."""
    query = next(script)
    result = yield query
    return result.rows


def _changed(script: Script[None], *, count: bool = False) -> Script[Any]:
    """Whether the one statement of ``script`` changed a row (``count``: how many)."""
    query = next(script)
    result = yield query
    return result.rowcount if count else result.rowcount == 1


def store_from_url(url: str) -> ChatStore:
    """See ``ChatStore.from_url``."""
    from lovia.stores.sql import parse_postgres_url, parse_sqlite_url

    from .sqlite import SQLiteChatStore

    if not isinstance(url, str) or not url.strip():
        raise UserError(
            f"not a chat store location: {url!r}",
            hint="a file path, sqlite:///path.db, postgresql://user@host/db or memory://",
        )
    scheme, sep, rest = url.partition("://")
    if not sep:
        return SQLiteChatStore(url)
    scheme = scheme.lower()
    if scheme in ("postgresql", "postgres"):
        from .postgres import PostgresChatStore

        dsn, schema = parse_postgres_url(url)
        return PostgresChatStore(dsn, schema=schema)
    if scheme == "sqlite":
        path, wal = parse_sqlite_url(url)
        return SQLiteChatStore(path, wal=True if wal is None else wal)
    if scheme == "memory" and not rest:
        return SQLiteChatStore(":memory:")
    raise UserError(
        f"no chat store for the URL {url!r}",
        hint="use a file path, sqlite:///path.db, postgresql://user@host/db?schema=name "
        "or memory://",
    )
