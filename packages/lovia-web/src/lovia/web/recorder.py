"""The context inspector's recorder: what each model call of a run was sent, in the run's log.

``record_views(agent, sink)`` returns a clone of the served agent (and of the agents its
handoffs reach) whose provider is wrapped (``RecordingProvider``) and which carries one
extra plugin (``ViewRecorder.plugin``). The plugin's ``setup`` hands the recorder the run's
``RunContext``, so it can read the live transcript (``ctx.entries``, the record), the turn
number and the workspace session; its ``aclose`` flushes what is left when the run ends.
Nothing in lovia-core changes: the wrapper sees exactly the ``view``, ``tools`` and
``response_format`` the loop passes to ``provider.stream()``, and the ``UsageDelta`` /
``FinishDelta`` that come back.

Each call becomes one ``context_view`` record (``CONTEXT_VIEW``), logged when its stream
ends, and stored compactly:

* The view is a list of *segments*: ``[a, b]`` stands for ``transcript[a:b]`` (entries the
  view shares, by identity, with the record), an int ``k`` for literal ``k``: an entry that
  is not in the record (a summary, a cleared or offloaded result's marker, an omission
  marker, a view injector's reminder). Literals are numbered per recorder and stored once
  (``lits``, with their kind and, for markers, the recall handle); a repeat is its number.
* ``keep`` says how many leading segments equal the previous call's: only the rest is
  stored. A view that grew by a turn stores a couple of segments, whatever its length.
* The system prompt (the transcript's head), the tool schemas (names and estimated
  tokens), the response format and the model are stored when they change.
* ``n`` is the record's length at the call and ``last`` a small mark of its last entry
  (type and call id or role), so the reader can tell when the stored record no longer
  lines up (a rewind). ``digest`` is a running hash of the record's entries up to ``n``
  (its system head left out: that is ``system``), kept up as entries are appended (each
  entry is hashed once): a record rewound and then written again (another message in the
  same places) has the same marks but not the same digest (``record_digest``).
* ``aside``: a call the run loop did not make for the turn but that used the run's
  provider, such as ``SummarizeHistory``'s fold (its view opens with a system prompt that
  is not the record's head). The reader counts it apart, never as the turn's call.

Decisions the chat's workspace session made (``lovia.workspace.PermissionDecision``, with
the rule that decided) are buffered with the turn they happened in and logged as
``context_permissions`` records before the next call and at the run's end. Only the run's
own decisions count: a session bound by the caller may serve several chats at once, so a
decision is taken only where the run's context (a ``ContextVar`` set when the run sets the
recorder up, inherited by its tool tasks and threads) names this recorder.

Per call the recorder indexes the transcript's new entries, compares the view with the
transcript run by run at C speed (O(segments) Python steps), and serialises only new
literals; ``benchmarks/bench_recorder.py`` measures it. Both record types are private: the
SSE stream sends them as empty ``context`` frames (ids stay contiguous) and AG-UI drops
them (``PRIVATE_RECORDS``).

A model given as a ``"vendor:model"`` string is built by the wrapper on first use and
closed when the run ends, as the runner does for such strings. Not recorded: blocking
chats (``POST /api/chat`` keeps no event log).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextvars import ContextVar
from itertools import compress, count, islice
from operator import is_not
from typing import TYPE_CHECKING, Any

from lovia.plugin import PluginInstance
from lovia.providers.base import FinishDelta, ModelDelta, ModelSettings, UsageDelta
from lovia.runtime._views import ViewWithTail
from lovia.transcript import (
    InputEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
    entry_to_dict,
)

if TYPE_CHECKING:
    from lovia.agent import Agent
    from lovia.messages import Usage
    from lovia.providers.base import Provider
    from lovia.run_context import RunContext
    from lovia.tools.base import Tool
    from lovia.workspace import PermissionDecision

__all__ = [
    "CONTEXT_PERMISSIONS",
    "CONTEXT_VIEW",
    "PRIVATE_RECORDS",
    "RecordingProvider",
    "Sink",
    "ViewRecorder",
    "classify_literal",
    "entry_mark",
    "record_digest",
    "record_views",
]

CONTEXT_VIEW = "context_view"
CONTEXT_PERMISSIONS = "context_permissions"
PRIVATE_RECORDS = frozenset({CONTEXT_VIEW, CONTEXT_PERMISSIONS})
"""Record types only the inspector reads: never sent to a chat client as they are."""

Sink = Callable[[str, dict[str, Any]], Awaitable[None]]
"""``await sink(type, data)``: appends one record to the run's log (``RunLog.put``)."""

_RUNNING: ContextVar[ViewRecorder | None] = ContextVar("lovia_web_recorder", default=None)
"""The recorder of the run whose code is executing (set in the run's own context)."""

_LITERAL_CACHE = 4096
"""Literal objects remembered by identity before the cache starts over (a reminder is a
new object every call; content dedupe still finds it)."""


def _marker_prefixes() -> tuple[str, str, str, re.Pattern[str]]:
    """What lovia-context's markers start with (rendered from its own functions, so a
    rewording there cannot silently turn markers into ``injected`` entries here), and the
    pattern of the recall call they name."""
    from lovia.context.prompts import SUMMARY_WRAPPER
    from lovia.context.render import clear_marker, offload_marker
    from lovia.context.state import OffloadRecord
    from lovia.tools.recall import RECALL_TOOL_NAME

    blank = ToolResultEntry(call_id="", output="")
    cleared = clear_marker(blank, recall=False).output.rstrip("]")
    offloaded = offload_marker(blank, OffloadRecord(preview="", chars=0, digest=""), recall=False)
    recall = re.compile(re.escape(RECALL_TOOL_NAME) + r'\("([^"]+)"\)')
    summary = SUMMARY_WRAPPER.split("{summary}", 1)[0]
    return cleared, offloaded.output.split("(", 1)[0], summary, recall


_CLEARED_PREFIX, _OFFLOADED_PREFIX, _SUMMARY_PREFIX, _RECALL = _marker_prefixes()


def classify_literal(entry: TranscriptEntry, *, trailing: bool) -> tuple[str, str | None]:
    """``(kind, recall handle)`` of a view entry that is not in the record.

    Kinds: ``cleared`` / ``offloaded`` (a result's marker, ``lovia.context.render``),
    ``summary``, ``omitted`` (the marker of a span left out), ``reminder`` (an entry after
    the last record entry: a view injector's), else ``replaced`` (a result) or ``injected``.
    """
    if isinstance(entry, ToolResultEntry):
        text = entry.output
        found = _RECALL.search(text)
        handle = found.group(1) if found else None
        if text.startswith(_CLEARED_PREFIX):
            return "cleared", handle
        if text.startswith(_OFFLOADED_PREFIX):
            return "offloaded", handle
        return "replaced", handle
    if isinstance(entry, InputEntry) and isinstance(entry.content, str):
        if _SUMMARY_PREFIX and entry.content.startswith(_SUMMARY_PREFIX):
            return "summary", None
        if entry.content.startswith("[") and "left out of this view" in entry.content:
            return "omitted", None
    return ("reminder" if trailing else "injected"), None


def entry_mark(entry: TranscriptEntry) -> str:
    """A small mark of an entry: its type and call id or role (the alignment check)."""
    if isinstance(entry, (ToolResultEntry, ToolCallEntry)):
        return f"{entry.type}:{entry.call_id}"
    if isinstance(entry, InputEntry):
        return f"{entry.type}:{entry.role}"
    return str(entry.type)


def _digest_text(entry: TranscriptEntry) -> bytes:
    """An entry as the digest reads it: its JSON as a store gives it back (no NUL, a lone
    surrogate as U+FFFD), so the record read from the chat's store hashes the same."""
    from .store.sql import clean_text

    text = json.dumps(entry_to_dict(entry), sort_keys=True, ensure_ascii=False, default=str)
    return clean_text(text).encode("utf-8")


def record_digest(entries: Sequence[TranscriptEntry]) -> str:
    """The ``digest`` of a record's entries (its system head left out), as the recorder
    logs it; the inspector compares the record it reads with it."""
    running = hashlib.blake2b(digest_size=8)
    for entry in entries:
        running.update(_digest_text(entry))
    return running.hexdigest()


def _usage_dict(usage: Usage | None) -> dict[str, int] | None:
    if usage is None:
        return None
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_tokens": usage.cache_read_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
    }


class ViewRecorder:
    """One run's recorder (see the module docstring); make a new one per run."""

    def __init__(self, sink: Sink) -> None:
        self._sink = sink
        self._ctx: RunContext[Any] | None = None
        self._index: dict[int, int] = {}
        """id(entry) -> its position in the transcript (checked by identity on use)."""
        self._indexed = 0
        self._tail: TranscriptEntry | None = None
        self._head: TranscriptEntry | None = None
        self._head_sent: object = None
        self._segs: list[Any] = []
        self._lits: dict[str, int] = {}
        self._lit_objs: dict[int, tuple[TranscriptEntry, int]] = {}
        self._tools: object = None
        self._response_format: object = None
        self._model: str | None = None
        self._calls = 0
        self._decisions: list[dict[str, Any]] = []
        self._unobserve: Callable[[], None] | None = None
        self._observed: object = None
        self._owned: list[Provider] = []
        """Providers built from a model string for this run: closed when it ends."""
        self._digest = hashlib.blake2b(digest_size=8)
        self._digested = 0
        """Entries of the record (its system head left out) in ``_digest`` so far."""

    def __repr__(self) -> str:
        return f"ViewRecorder(calls={self._calls})"

    # -- the run's side ----------------------------------------------------------------

    def plugin(self) -> _RecorderPlugin:
        """The plugin that binds this recorder to the run (add it to the agent)."""
        return _RecorderPlugin(self)

    def bind(self, ctx: RunContext[Any]) -> None:
        self._ctx = ctx

    def _watch_workspace(self, ctx: RunContext[Any]) -> None:
        session = ctx.workspace
        if session is self._observed:
            return
        if self._unobserve is not None:
            self._unobserve()
            self._unobserve = None
        self._observed = session
        add = getattr(session, "add_observer", None)
        if callable(add):
            self._unobserve = add(self._on_decision)

    def _on_decision(self, decision: PermissionDecision) -> None:
        if _RUNNING.get() is not self:  # another run on the same session (another chat)
            return
        ctx = self._ctx
        self._decisions.append(
            {
                "turn": ctx.turn if ctx is not None else 0,
                "kind": decision.kind,
                "subject": decision.subject,
                "op": decision.op,
                "decision": decision.decision,
                "rule": decision.rule,
                "pattern": decision.pattern,
                "enforced": decision.enforced,
            }
        )

    async def flush(self) -> None:
        """Log the buffered workspace decisions (if any)."""
        if self._decisions:
            decisions, self._decisions = self._decisions, []
            await self._sink(CONTEXT_PERMISSIONS, {"decisions": decisions})

    def own(self, provider: Provider) -> None:
        """Close ``provider`` when the run ends (one built here from a model string)."""
        self._owned.append(provider)

    async def aclose(self) -> None:
        """The run ends: log what is buffered, stop watching the workspace, close the
        providers built for the run. Called once per agent the run reached: idempotent."""
        if self._unobserve is not None:
            self._unobserve()
            self._unobserve = None
        owned, self._owned = self._owned, []
        try:
            await self.flush()
        finally:
            for provider in owned:
                close = getattr(provider, "aclose", None)
                if callable(close):
                    await close()

    # -- one call ----------------------------------------------------------------------

    async def stream(
        self,
        provider: Provider,
        view: Sequence[TranscriptEntry],
        tools: Sequence[Tool],
        response_format: dict[str, Any] | None,
        settings: ModelSettings | None,
    ) -> AsyncIterator[ModelDelta]:
        """``provider.stream(...)`` forwarded unchanged; the call is logged when it ends."""
        if self._ctx is not None:
            self._watch_workspace(self._ctx)
        if self._decisions:
            await self.flush()
        data = self.encode(view, tools, response_format, provider)
        usage: Usage | None = None
        finish: str | None = None
        status = "failed"
        exhausted = False
        stream = provider.stream(
            view, tools=tools, response_format=response_format, settings=settings
        )
        try:
            async for delta in stream:
                kind = type(delta)
                if kind is UsageDelta:
                    usage = delta.usage if usage is None else usage.updated(delta.usage)  # type: ignore[union-attr]  # by kind
                elif kind is FinishDelta:
                    finish = delta.reason  # type: ignore[union-attr]  # narrowed by kind
                    status = "completed"
                yield delta
            exhausted = True
        except GeneratorExit:
            status = "abandoned" if status != "completed" else status
            raise
        finally:
            close = None if exhausted else getattr(stream, "aclose", None)
            if close is not None:  # an abandoned or failed stream releases its connection
                await close()
            data["usage"] = _usage_dict(usage)
            data["finish"] = finish
            data["status"] = status
            await self._sink(CONTEXT_VIEW, data)

    def encode(
        self,
        view: Sequence[TranscriptEntry],
        tools: Sequence[Tool],
        response_format: dict[str, Any] | None,
        provider: Provider,
    ) -> dict[str, Any]:
        """The ``context_view`` data of one call (without its outcome)."""
        self._calls += 1
        ctx = self._ctx
        entries: list[TranscriptEntry] = ctx.entries if ctx is not None else []
        self._sync_index(entries)
        n = len(entries)
        raw = self._segments(_as_list(view), entries)
        last_range = max((i for i, s in enumerate(raw) if isinstance(s, list)), default=-1)
        new_lits: list[dict[str, Any]] = []
        segs = [
            s if isinstance(s, list) else self._literal(s, i > last_range, new_lits)
            for i, s in enumerate(raw)
        ]
        prev = self._segs
        keep = 0
        limit = min(len(prev), len(segs))
        while keep < limit and prev[keep] == segs[keep]:
            keep += 1
        self._segs = segs
        data: dict[str, Any] = {
            "turn": ctx.turn if ctx is not None else 0,
            "call": self._calls,
            "n": n,
            "keep": keep,
            "segs": segs[keep:],
        }
        if self._calls == 1:
            data["start"] = True
        if _is_aside(raw, self._head):
            data["aside"] = True
        if n:
            data["last"] = entry_mark(entries[-1])
        data["digest"] = self._record_digest(entries)
        if new_lits:
            data["lits"] = new_lits
        head = self._head
        if head is not self._head_sent:
            self._head_sent = head
            data["system"] = head.content if isinstance(head, InputEntry) else None
        if tools is not self._tools:
            self._tools = tools
            data["tools"] = _tool_summary(tools)
        if response_format is not self._response_format:
            self._response_format = response_format
            data["response_format"] = response_format
        model = f"{provider.name}:{provider.model}"
        if model != self._model:
            self._model = data["model"] = model
        return data

    def _segments(self, view: list[TranscriptEntry], entries: list[TranscriptEntry]) -> list[Any]:
        """The view as ranges ``[a, b]`` of the transcript and literal entries.

        Runs of entries shared with the transcript are measured at C speed: two slices
        compared with ``==`` (identity short-cuts each item; an entry equal to the record's
        is the record's as far as the model can tell), else the first entry that is not
        the record's, found with ``map(is_not, ...)`` and ``compress``. Only a range's first
        entry and each literal cost a step here: O(segments) Python steps, O(view) C work.
        """
        raw: list[Any] = []
        index = self._index
        n = len(entries)
        size = len(view)
        i = 0
        while i < size:
            e = view[i]
            pos = index.get(id(e))
            if pos is None or pos >= n or entries[pos] is not e:
                raw.append(e)
                i += 1
                continue
            limit = min(size - i, n - pos)
            mine, theirs = view[i : i + limit], entries[pos : pos + limit]
            if mine == theirs:  # the common case: item by item, identity first, in C
                run = limit
            else:
                run = next(compress(count(), map(is_not, mine, theirs)), limit)
            if raw and isinstance(raw[-1], list) and raw[-1][1] == pos:
                raw[-1][1] = pos + run
            else:
                raw.append([pos, pos + run])
            i += run
        return raw

    def _sync_index(self, entries: list[TranscriptEntry]) -> None:
        """Index the transcript's new entries (it only grows, but for its head)."""
        n = len(entries)
        done = self._indexed
        if done and (done > n or entries[done - 1] is not self._tail):
            self._index.clear()  # the head was inserted or removed: positions moved
            done = 0
        index = self._index
        for i in range(done, n):
            index[id(entries[i])] = i
        self._indexed = n
        if n:
            self._tail = entries[-1]
            first = entries[0]
            if first is not self._head:
                index[id(first)] = 0  # a replaced head keeps position 0
            is_head = isinstance(first, InputEntry) and first.role == "system"
            self._head = first if is_head else None
        else:
            self._head = None

    def _record_digest(self, entries: list[TranscriptEntry]) -> str:
        """The running digest of the record without its head, updated with the entries
        appended since the last call (the head may come and go on a handoff; the rest only
        grows, and is hashed again from the start if it ever did not)."""
        skip = 1 if self._head is not None else 0
        size = len(entries) - skip
        if size < self._digested:
            self._digest, self._digested = hashlib.blake2b(digest_size=8), 0
        for entry in islice(entries, skip + self._digested, None):
            self._digest.update(_digest_text(entry))
        self._digested = size
        return self._digest.hexdigest()

    def _literal(self, entry: TranscriptEntry, trailing: bool, new: list[dict[str, Any]]) -> int:
        known = self._lit_objs.get(id(entry))
        if known is not None and known[0] is entry:
            return known[1]
        data = entry_to_dict(entry)
        key = json.dumps(data, sort_keys=True, ensure_ascii=False, default=str)
        lit = self._lits.get(key)
        if lit is None:
            lit = self._lits[key] = len(self._lits)
            kind, handle = classify_literal(entry, trailing=trailing)
            item: dict[str, Any] = {"id": lit, "kind": kind, "entry": data}
            if handle is not None:
                item["recall"] = handle
            new.append(item)
        if len(self._lit_objs) >= _LITERAL_CACHE:
            self._lit_objs.clear()
        self._lit_objs[id(entry)] = (entry, lit)
        return lit


def _is_aside(raw: list[Any], head: TranscriptEntry | None) -> bool:
    """Whether a view (as ``_segments`` split it) is not the loop's: the loop's view opens
    with the record's head, or, for a record without one, with no system entry at all; a
    summariser's request opens with a system prompt of its own (a literal)."""
    first = raw[0] if raw else None
    if first is None or isinstance(first, list):
        return False
    return isinstance(first, InputEntry) and first.role == "system" and first != head


def _as_list(view: Sequence[TranscriptEntry]) -> list[TranscriptEntry]:
    """The view as a list, copied at C speed: a ``ViewWithTail`` (the loop's view plus view
    injectors' entries) iterates in Python, so its base and tail are taken apart."""
    if type(view) is ViewWithTail:
        base, size, tail = view._base, view._size, view._tail  # (private: read, never changed)
        out = base[:size] if isinstance(base, list) else list(islice(base, size))
        out.extend(tail)
        return out
    return view if isinstance(view, list) else list(view)


def _tool_summary(tools: Sequence[Tool]) -> dict[str, Any]:
    from lovia.context import TokenCounter

    return {"names": [t.name for t in tools], "tokens": TokenCounter().count_tools(list(tools))}


class _RecorderPlugin:
    """Binds a ``ViewRecorder`` to the run it is set up in (contributes nothing else)."""

    def __init__(self, recorder: ViewRecorder) -> None:
        self.recorder = recorder

    def __repr__(self) -> str:
        return "ContextRecorder()"

    async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
        self.recorder.bind(ctx)
        # Set in the run's own context: the run's tools (tasks and threads it starts copy
        # the context) carry it to the workspace; another chat's run does not.
        _RUNNING.set(self.recorder)
        return PluginInstance(aclose=self.recorder.aclose)


class RecordingProvider:
    """A provider that is ``inner`` in every respect, except that ``stream`` is recorded.

    Attributes it does not define (``context_window``, ``estimate_tokens``, ...) are the
    inner provider's, so capability checks (``isinstance`` against the runtime-checkable
    protocols) answer as they would for ``inner``. A ``"vendor:model"`` string is built on
    first use (after the recorder's plugin was set up, so the run's end closes it, as the
    runner would have closed the provider it built from the string).
    """

    def __init__(self, inner: Provider | str, recorder: ViewRecorder) -> None:
        self._spec = inner if isinstance(inner, str) else None
        self._inner: Provider | None = None if isinstance(inner, str) else inner
        self._recorder = recorder
        if self._inner is not None:
            # Copied (the protocol declares plain attributes): read every call, kept fast.
            self.name = self._inner.name
            self.model = self._inner.model
            self.supports_json_schema = self._inner.supports_json_schema

    def __repr__(self) -> str:
        return f"RecordingProvider({self._inner if self._inner is not None else self._spec!r})"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_inner", "_spec", "_recorder"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    @property
    def inner(self) -> Provider:
        """The wrapped provider (built from the model string on first use)."""
        if self._inner is None:
            from lovia.providers.registry import provider_from_string

            assert self._spec is not None
            self._inner = provider_from_string(self._spec)
            self._recorder.own(self._inner)
        return self._inner

    def stream(
        self,
        entries: Sequence[TranscriptEntry],
        *,
        tools: Sequence[Tool] = (),
        response_format: dict[str, Any] | None = None,
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[ModelDelta]:
        return self._recorder.stream(self.inner, entries, tools, response_format, settings)


def record_views(agent: Agent[Any], sink: Sink) -> Agent[Any]:
    """A clone of ``agent`` (and of the agents its handoffs reach) whose model calls are
    recorded into ``sink``; ``agent`` itself when it has no model."""
    if agent.model is None:
        return agent
    recorder = ViewRecorder(sink)
    plugin = recorder.plugin()
    clones: dict[int, Agent[Any]] = {}

    def wrap(original: Agent[Any]) -> Agent[Any]:
        done = clones.get(id(original))
        if done is not None:
            return done
        model: Any = original.model
        if model is not None:
            model = RecordingProvider(model, recorder)
        clone = clones[id(original)] = original.clone(
            model=model, plugins=(*original.plugins, plugin)
        )
        if original.handoffs:  # set after the clone exists: handoffs may form a cycle
            clone.handoffs = tuple(_rewire(h, wrap) for h in original.handoffs)
        return clone

    return wrap(agent)


def _rewire(target: Any, wrap: Callable[[Agent[Any]], Agent[Any]]) -> Any:
    from dataclasses import replace

    from lovia.agent import Agent
    from lovia.handoff import Handoff

    if isinstance(target, Agent):
        return wrap(target)
    if isinstance(target, Handoff):
        return replace(target, target=wrap(target.target))
    return target
