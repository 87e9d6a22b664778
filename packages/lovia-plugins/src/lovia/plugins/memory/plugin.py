"""``Memory``: long-term memory across sessions, as pure policy over two storage seams.

* **Notes** (hot): a ``NotesStore`` (``MEMORY.md`` by default), always injected into the
  system prompt with a budget meter, edited by the ``remember``/``forget`` tools.
* **Archive** (cold): an ``Index`` (``archive.db``), searched by the ``recall`` tool.

At the end of each run a ``RunCompleted`` hook ingests the run's user and assistant
messages into the archive (ids ``run_id:seq``, so a re-ingested run upserts) and, with
``auto_curate``, asks the model for one digest: new facts (strictly admitted), notes to
retire (applied together as one save) and an episode summary for the archive. Every step
fails open: a failed digest still ingests, a failed ingest still curates, and the run's
outcome never changes. With ``curate_in_background`` that work runs as a task parked on
the plugin (it outlives the run); ``drain()`` waits for it.

Dreaming consolidates the notes with one model call: when they outgrow ``notes_budget``,
every ``dream_every_days`` (skipped while the file is unchanged since the last dream; the
first contact only starts the clock) or on demand. The old body is backed up first, an
empty rewrite keeps the notes, and a fact remembered while the model was thinking is
merged back in, so it is never lost.

Notes writes are serialised by a thread lock and, for ``FileNotesStore``, a file lock, so
concurrent runs and processes never lose a fact.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from lovia.events import RunCompleted
from lovia.exceptions import LoviaError, UserError
from lovia.hooks import AgentHooks
from lovia.plugin import PluginInstance
from lovia.tools.base import Tool
from lovia.transcript import AssistantTextEntry, InputEntry, TranscriptEntry

from . import curation
from .index import Doc, Index, KeywordIndex
from .notes import (
    FileNotesStore,
    Note,
    NotesStore,
    dedupe_notes,
    normalise_fact,
    parse_notes,
    render_notes,
    this_month,
    write_atomic,
)
from .vector import Embedder, VectorIndex

if TYPE_CHECKING:
    from lovia.agent import Agent
    from lovia.run_context import RunContext
    from lovia.runtime.result import RunResult

__all__ = ["Memory"]

_log = logging.getLogger("lovia.plugins.memory")


class _Default:
    def __repr__(self) -> str:
        return "<archive.db under root>"


_DEFAULT_INDEX: Any = _Default()
_MAX_TOOL_FACT_CHARS = 500
"""The notes are always in the prompt: the model may not paste a document into them."""

_GUIDANCE = (
    "Use `remember` for durable facts that will matter in future conversations (the user's "
    "preferences, names, decisions), `forget` when a note stops being true"
)


def _key(fact: str) -> str:
    return normalise_fact(fact).casefold()


class Memory:
    """Long-term memory: hot notes in the prompt, a searchable archive, curation at run end."""

    def __init__(
        self,
        root: str | os.PathLike[str] = "./.lovia/memory",
        *,
        notes: NotesStore | None = None,
        index: Index | None = _DEFAULT_INDEX,
        embedder: Embedder | None = None,
        auto_curate: bool = True,
        curate_in_background: bool = False,
        expand_query: bool | Literal["auto"] = "auto",
        summarize_recall: bool = True,
        recall_k: int = 5,
        notes_budget: int = 8000,
        dream_every_days: float = 3,
        model: Any = None,
        name: str = "memory",
    ) -> None:
        if embedder is not None and index is not _DEFAULT_INDEX:
            raise UserError(
                "Memory(embedder=) cannot be combined with index=",
                hint="build the index yourself, e.g. KeywordIndex(p) | VectorIndex(p, embedder)",
            )
        if recall_k < 1 or notes_budget < 1 or dream_every_days <= 0:
            raise UserError(
                "recall_k and notes_budget must be >= 1 and dream_every_days > 0",
                hint=f"got recall_k={recall_k}, notes_budget={notes_budget}, "
                f"dream_every_days={dream_every_days}",
            )
        self.name = name
        self.root = Path(root).expanduser()
        self.notes: NotesStore = (
            notes if notes is not None else FileNotesStore(self.root / "MEMORY.md")
        )
        if index is _DEFAULT_INDEX:
            archive = self.root / "archive.db"
            keyword = KeywordIndex(archive)
            index = keyword | VectorIndex(archive, embedder) if embedder else keyword
        self.index: Index | None = index
        self.auto_curate = auto_curate
        self.curate_in_background = curate_in_background
        self.expand_query = (
            isinstance(index, KeywordIndex) if expand_query == "auto" else expand_query
        )
        self.summarize_recall = summarize_recall
        self.recall_k = recall_k
        self.notes_budget = notes_budget
        self.dream_every_days = dream_every_days
        self.model = model
        self._lock = threading.Lock()
        self._dreaming = threading.Lock()
        """Held for a whole dream, model call included: dreams never overlap."""
        self._pending: set[asyncio.Task[None]] = set()

    def __repr__(self) -> str:
        return f"Memory({str(self.root)!r}, notes={self.notes!r}, index={self.index!r})"

    # -- the notes (blocking; the tools run them on worker threads) ---------------------

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        lock = getattr(self.notes, "lock", None)  # optional: cross-process stores offer it
        with self._lock, lock() if callable(lock) else contextlib.nullcontext():
            yield

    def _update(self, change: Callable[[list[Note]], list[Note]]) -> tuple[int, int]:
        """Load, change and save the notes under the lock; returns (before, after) counts."""
        with self._locked():
            current = self.notes.load()
            updated = dedupe_notes(change(list(current)))
            if updated != current:
                self.notes.save(updated)
            return len(current), len(updated)

    def remember(self, fact: str) -> bool:
        """Add ``fact`` (this month); ``False`` when it was already noted."""
        text = normalise_fact(fact)
        if not text:
            raise UserError("cannot remember an empty fact")
        before, after = self._update(lambda notes: [*notes, Note(text, this_month())])
        return after > before

    def forget(self, fact: str) -> int:
        """Remove the note equal to ``fact`` or, failing that, the notes containing it."""
        key = _key(fact)
        if not key:
            return 0

        def drop(notes: list[Note]) -> list[Note]:
            kept = [n for n in notes if _key(n.fact) != key]
            if len(kept) == len(notes):
                kept = [n for n in notes if key not in _key(n.fact)]
            return kept

        before, after = self._update(drop)
        return before - after

    def notes_body(self) -> str:
        """The notes as ``MEMORY.md`` text (normalised)."""
        return render_notes(self.notes.load())

    def replace_notes(self, body: str) -> str:
        """Replace every note with the bullets of ``body``; returns the normalised body."""
        notes = parse_notes(body)
        self._update(lambda _: notes)
        return render_notes(notes)

    def _instructions(self, notes: list[Note]) -> str:
        body = render_notes(notes)
        used = len(body)
        meter = f"{used:,} / {self.notes_budget:,} characters"
        if used > self.notes_budget:
            meter += "; over budget, so keep new notes rare and retire stale ones"
        tools = _GUIDANCE + (", and `recall` to search past conversations." if self.index else ".")
        shown = body.rstrip() or "(no notes yet)"
        return f"## Memory\nYour long-term notes ({meter}):\n{shown}\n\n{tools}"

    # -- the run ---------------------------------------------------------------------------

    async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
        notes = await asyncio.to_thread(self.notes.load)
        hooks = AgentHooks()
        hooks.on(RunCompleted)(self._on_run_completed)
        return PluginInstance(
            tools=self._tools(), instructions=self._instructions(notes), hooks=hooks
        )

    def _tools(self) -> tuple[Tool, ...]:
        def fact_tool(name: str, description: str, fn: Callable[[str], str]) -> Tool:
            async def invoke(args: dict[str, Any], ctx: RunContext[Any]) -> str:
                return await asyncio.to_thread(fn, str(args.get("fact", "")))

            params = {
                "type": "object",
                "properties": {"fact": {"type": "string", "description": "One short fact."}},
                "required": ["fact"],
            }
            return Tool(name=name, description=description, parameters=params, invoke=invoke)

        def remember(fact: str) -> str:
            if not normalise_fact(fact):
                return "Nothing to remember: the fact is empty."
            if len(normalise_fact(fact)) > _MAX_TOOL_FACT_CHARS:
                return f"Not saved: keep a note under {_MAX_TOOL_FACT_CHARS} characters."
            return "Remembered." if self.remember(fact) else "Already in your notes."

        def forget(fact: str) -> str:
            removed = self.forget(fact)
            return (
                f"Forgot {removed} note(s)." if removed else "No note matched; nothing forgotten."
            )

        tools = [
            fact_tool("remember", "Save a durable fact to your long-term notes.", remember),
            fact_tool("forget", "Remove a note that is no longer true.", forget),
        ]
        if self.index is not None:

            async def recall(args: dict[str, Any], ctx: RunContext[Any]) -> str:
                return await self.recall(
                    str(args.get("query", "")), model=self._model_for(ctx.agent)
                )

            tools.append(
                Tool(
                    name="recall",
                    description="Search past conversations and episode summaries.",
                    parameters={
                        "type": "object",
                        "properties": {"query": {"type": "string", "description": "What to find."}},
                        "required": ["query"],
                    },
                    invoke=recall,
                )
            )
        return tuple(tools)

    def _model_for(self, agent: Agent[Any] | None) -> Any:
        return self.model if self.model is not None else getattr(agent, "model", None)

    async def recall(self, query: str, *, model: Any = None) -> str:
        """Search the archive (expanding the query and summarising hits when configured)."""
        if self.index is None:
            return "Memory has no archive to search."
        if not query.strip():
            return "Give a query to search your memories."
        model = model if model is not None else self.model
        terms = query
        if self.expand_query and model is not None:
            try:
                terms = await curation.expand_query(model, query)
            except Exception as exc:  # noqa: BLE001 - fail open to the raw query
                _log.warning("memory query expansion failed: %s", exc)
        try:
            hits = await self.index.search(terms, self.recall_k)
        except LoviaError as exc:
            return f"Error: {exc}"
        if not hits:
            return f"No memories found for {query!r}."
        if self.summarize_recall and model is not None:
            try:
                return await curation.summarize_hits(model, query, hits)
            except Exception as exc:  # noqa: BLE001 - fail open to the raw hits
                _log.warning("memory recall summary failed: %s", exc)
        return curation.render_hits(hits)

    async def _on_run_completed(self, event: RunCompleted, ctx: RunContext[Any]) -> None:
        work = self._after_run(event.result, list(ctx.entries), self._model_for(ctx.agent))
        if not self.curate_in_background:
            await work
            return
        task = asyncio.create_task(work)  # parked on the plugin: it outlives the run
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def drain(self) -> None:
        """Wait until background curation (and any work it started) has settled."""
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)

    async def _after_run(
        self, result: RunResult[Any], entries: list[TranscriptEntry], model: Any
    ) -> None:
        try:
            await self._ingest(result)
        except Exception:  # noqa: BLE001 - fail open: curation still runs
            _log.warning("memory: ingesting run %s failed", result.run_id, exc_info=True)
        if self.auto_curate and model is not None:
            try:
                await self._curate(result, entries, model)
            except Exception:  # noqa: BLE001 - fail open: messages are already ingested
                _log.warning("memory: curating run %s failed", result.run_id, exc_info=True)
        try:
            release = await self._claim_dream(wait=False)
            if release is None:
                return  # another dream of these notes is running: it covers this one
            try:
                if await asyncio.to_thread(self._dream_due) and model is not None:
                    await self._dream(model)
            finally:
                release()
        except Exception:  # noqa: BLE001 - fail open: dreaming is an optimisation
            _log.warning("memory: dreaming failed", exc_info=True)

    async def _ingest(self, result: RunResult[Any]) -> None:
        if self.index is None:
            return
        when = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        docs = []
        for seq, entry in enumerate(result.entries):
            if isinstance(entry, InputEntry) and entry.role == "user":
                if not isinstance(entry.content, str):
                    continue
                role, text = "user", entry.content
            elif isinstance(entry, AssistantTextEntry):
                role, text = "assistant", entry.content
            else:
                continue  # tool and system entries stay out of the archive
            if text.strip():
                meta = {"role": role, "run_id": result.run_id, "session_id": result.session_id}
                docs.append(Doc(f"{result.run_id}:{seq}", text, meta, when))
        await self.index.add(docs)

    async def _curate(
        self, result: RunResult[Any], entries: list[TranscriptEntry], model: Any
    ) -> None:
        notes = await asyncio.to_thread(self.notes.load)
        digest = await curation.digest_run(model, entries, notes)
        retire = {_key(f) for f in digest.retire}

        def apply(current: list[Note]) -> list[Note]:
            kept = [n for n in current if _key(n.fact) not in retire]
            admitted = curation.admit(digest.remember, kept)
            return [*kept, *(Note(f, this_month()) for f in admitted)]

        await asyncio.to_thread(self._update, apply)
        if digest.summary and self.index is not None:
            when = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
            meta = {"kind": "episode", "run_id": result.run_id, "session_id": result.session_id}
            await self.index.add([Doc(f"{result.run_id}:summary", digest.summary, meta, when)])

    # -- dreaming ----------------------------------------------------------------------------

    @property
    def _marker(self) -> Path:
        return self.root / ".dreamed"

    def _dream_due(self) -> bool:
        """Over budget, or the cadence elapsed with the notes changed since the last dream."""
        if len(render_notes(self.notes.load())) > self.notes_budget:
            return True
        try:
            dreamed = self._marker.stat().st_mtime
        except FileNotFoundError:
            self._touch_marker()  # first contact starts the clock
            return False
        if time.time() - dreamed < self.dream_every_days * 86400:
            return False
        if isinstance(self.notes, FileNotesStore):
            try:
                return self.notes.path.stat().st_mtime > dreamed
            except FileNotFoundError:
                return False
        return True  # a custom store cannot tell whether it changed: cadence only

    def _touch_marker(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self._marker.touch()
        os.utime(self._marker)

    async def dream(self, model: Any = None) -> tuple[int, int]:
        """Consolidate the notes now; returns the note counts (before, after)."""
        model = model if model is not None else self.model
        if model is None:
            raise UserError(
                "Memory.dream() needs a model", hint="pass dream(model=...) or Memory(model=...)"
            )
        release = await self._claim_dream(wait=True)
        assert release is not None  # a waiting claim always lands
        try:
            return await self._dream(model)
        finally:
            release()

    async def _claim_dream(self, *, wait: bool) -> Callable[[], None] | None:
        """The dream slot, off-loop; ``None`` when it is busy and ``wait`` is false.

        A claim that lands after its waiter was cancelled is released at once.
        """
        claim = asyncio.ensure_future(asyncio.to_thread(self._claim_dream_blocking, wait))
        try:
            return await asyncio.shield(claim)
        except asyncio.CancelledError:

            def release_late(done: asyncio.Future[Callable[[], None] | None]) -> None:
                if not done.cancelled() and done.exception() is None:
                    release = done.result()
                    if release is not None:
                        release()

            claim.add_done_callback(release_late)
            raise

    def _claim_dream_blocking(self, wait: bool) -> Callable[[], None] | None:
        """Take this memory's dream lock and, for ``FileNotesStore``, an ``flock`` on
        ``.dreaming.lock`` (so two processes never dream at once either)."""
        if not self._dreaming.acquire(blocking=wait):
            return None
        handle = None
        try:
            if isinstance(self.notes, FileNotesStore):
                import fcntl

                self.root.mkdir(parents=True, exist_ok=True)
                handle = open(self.root / ".dreaming.lock", "a")  # noqa: SIM115 - held past here
                fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            if handle is not None:
                handle.close()
            self._dreaming.release()
            return None
        except BaseException:
            if handle is not None:
                handle.close()
            self._dreaming.release()
            raise

        def release() -> None:
            if handle is not None:
                handle.close()  # closing the file drops the flock
            self._dreaming.release()

        return release

    async def _dream(self, model: Any) -> tuple[int, int]:
        snapshot = await asyncio.to_thread(self.notes.load)
        if not snapshot:
            await asyncio.to_thread(self._touch_marker)
            return 0, 0
        await asyncio.to_thread(self._backup)
        rewritten = dedupe_notes(await curation.rewrite_notes(model, snapshot, self.notes_budget))
        if not rewritten:
            await asyncio.to_thread(self._touch_marker)
            return len(snapshot), len(snapshot)  # an empty rewrite keeps the notes
        before_keys = {_key(n.fact) for n in snapshot}

        def merge(current: list[Note]) -> list[Note]:
            # Facts remembered or forgotten while the model was thinking win over the rewrite.
            now_keys = {_key(n.fact) for n in current}
            forgotten = before_keys - now_keys
            added = [n for n in current if _key(n.fact) not in before_keys]
            return [*(n for n in rewritten if _key(n.fact) not in forgotten), *added]

        before = len(snapshot)
        _, after = await asyncio.to_thread(self._update, merge)
        await asyncio.to_thread(self._touch_marker)
        return before, after

    def _backup(self) -> None:
        store = self.notes
        if isinstance(store, FileNotesStore):
            body, target = store.read_body(), store.path.with_name(store.path.name + ".bak")
        else:
            body, target = render_notes(store.load()), self.root / "MEMORY.md.bak"
        write_atomic(target, body)
