"""The per-call fast paths of ``Compaction.compact`` against the general path.

``_sync_appended`` (append-only view sync), the cached ``TokenBudget``, the offered-tools
total and the calibration copied only after a fold must never change a result: the same
random edits of a transcript (appends, images, entries replaced in place, rewinds, a
swapped or grown system head, a changed tool set, calibration samples, reported windows,
overflows, recall toggled) go through one policy with those paths and one without them;
every view, figure and persisted blob must match, and the blob must be the live state.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from lovia.context import ClearToolResults, Compaction, OffloadToolResults
from lovia.context.compaction import SCRATCH_KEY
from lovia.context.window import learn_window, resolve_window, window_key
from lovia.parts import ImagePart, TextPart
from lovia.transcript import (
    AssistantTextEntry,
    InputEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
)

from .ctx_support import dump, request


def _policy() -> Compaction:
    return Compaction(
        context_window=12_000,
        reserve_output_tokens=0,
        compact_at=0.8,
        compact_to=0.5,
        stages=[OffloadToolResults(), ClearToolResults()],
    )


def _without_fast_paths(policy: Compaction) -> Compaction:
    """The general path only: no append-only sync, no cached budget or tools total, the
    window key always built."""
    policy._sync_appended = lambda *args: False  # type: ignore[method-assign]
    budget = policy._budget

    def fresh_budget(*args: Any, **kwargs: Any) -> Any:
        policy._budget_cache = None
        return budget(*args, **kwargs)

    policy._budget = fresh_budget  # type: ignore[method-assign]

    def window_always_keyed(req: Any, track: Any) -> int | None:
        # (What _window did before it skipped the key when nothing can be learned.)
        key = window_key(req.provider, req.model)
        learned = learn_window(
            track.state,
            key,
            reported=req.reported_window,
            last_input_tokens=req.last_input_tokens,
            overflow=req.overflow,
        )
        track.dirty = track.dirty or learned
        base = policy.context_window
        return resolve_window(
            track.probe.claimed if base is None else base, track.state.learned_windows.get(key)
        )

    policy._window = window_always_keyed  # type: ignore[method-assign]
    compact = policy.compact

    async def uncached_tools(req: Any) -> Any:
        for track in policy._tracks.values():
            track.counter._last_tools = ((), 0)
        return await compact(req)

    policy.compact = uncached_tools  # type: ignore[method-assign]
    return policy


class _Tool:
    """An offered tool: only its schema size matters here."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __str__(self) -> str:
        return json.dumps({"name": self.name, "parameters": {"q": "string"}})


def _exchange(rng: random.Random, n: int, cid: str | None = None) -> list[TranscriptEntry]:
    cid = cid or f"call_{n}"
    return [
        ToolCallEntry(cid, "lookup", json.dumps({"q": n})),
        ToolResultEntry(cid, f"{n}:" + "x" * rng.choice((50, 800, 3_000))),
        AssistantTextEntry(f"answer {n}"),
    ]


def _edit(
    rng: random.Random, entries: list[TranscriptEntry], n: int, cut: list[TranscriptEntry]
) -> list[TranscriptEntry]:
    """One random change of the transcript, as a new list (the loop's or a plugin's);
    ``cut`` keeps what the last rewind removed, which may come back (the same objects)."""
    out = list(entries)
    op = rng.choice(
        ["append"] * 6
        + ["image", "replace_last", "replace_mid", "rewind", "rewind_same", "swap_head"]
        + ["grow_head", "user", "nothing", "restore", "restore", "reuse_id"]
    )
    head = next((i for i, e in enumerate(out) if not _is_system(e)), len(out))
    if op == "append":
        out.extend(_exchange(rng, n))
    elif op == "reuse_id":
        ids = [e.call_id for e in out if isinstance(e, ToolCallEntry)]
        out.extend(_exchange(rng, n, rng.choice(ids) if ids else None))  # an id seen before
    elif op == "image":
        out.append(InputEntry("user", (TextPart(f"see {n}"), ImagePart(url=f"https://x/{n}"))))
    elif op == "user":
        out.append(InputEntry("user", f"question {n}"))
    elif op == "replace_last" and len(out) > head:
        out[-1] = _same_or_other(rng, out[-1])
    elif op == "replace_mid" and len(out) > head + 2:
        i = rng.randrange(head, len(out) - 1)
        out[i] = _same_or_other(rng, out[i])
    elif op == "rewind" and len(out) > head + 1:
        at = rng.randrange(head + 1, len(out))
        cut[:] = out[at:]
        del out[at:]
    elif op == "restore" and cut:
        out.extend(cut[: rng.randrange(1, len(cut) + 1)])  # decided ids among new entries
        cut.clear()
    elif op == "rewind_same" and len(out) > head + 1:
        at = rng.randrange(head + 1, len(out))
        out = out[:at] + out[at:]  # the same objects again, after a rewind
    elif op == "swap_head":
        out[0] = InputEntry("system", f"system {n}")
    elif op == "grow_head" and len(out) > head:
        out.insert(head, InputEntry("system", f"extra system {n}"))
    return out


def _is_system(entry: TranscriptEntry) -> bool:
    return isinstance(entry, InputEntry) and entry.role == "system"


def _same_or_other(rng: random.Random, entry: TranscriptEntry) -> TranscriptEntry:
    """A new object: an equal copy, or one whose content differs."""
    if isinstance(entry, ToolResultEntry):
        output = entry.output if rng.random() < 0.5 else entry.output[: len(entry.output) // 3]
        return ToolResultEntry(entry.call_id, output, is_error=entry.is_error)
    if isinstance(entry, AssistantTextEntry):
        return AssistantTextEntry(entry.content + ("" if rng.random() < 0.5 else " (edited)"))
    if isinstance(entry, ToolCallEntry):
        return ToolCallEntry(entry.call_id, entry.name, entry.arguments)
    if isinstance(entry, InputEntry):
        return InputEntry(entry.role, entry.content)
    return entry


@pytest.mark.parametrize("seed", range(60))
async def test_the_fast_paths_give_what_the_general_path_gives(seed: int) -> None:
    rng = random.Random(seed)
    fast, slow = _policy(), _without_fast_paths(_policy())
    fast_scratch: dict[str, Any] = {}
    slow_scratch: dict[str, Any] = {}
    entries: list[TranscriptEntry] = [InputEntry("system", "sys"), InputEntry("user", "go")]
    tool_sets = [
        (_Tool("lookup"),),
        (_Tool("a_tool_with_a_much_longer_name_and_schema"),),  # as many tools, other sizes
        (_Tool("lookup"), _Tool("other")),
        (),
    ]
    tools = tool_sets[0]
    cut: list[TranscriptEntry] = []
    for n in range(80):
        entries = _edit(rng, entries, n, cut)
        if rng.random() < 0.1:
            tools = rng.choice(tool_sets)  # a handoff offers other tools
        names = {"lookup"} | ({"recall_tool_result"} if rng.random() < 0.8 else set())
        kwargs: dict[str, Any] = {
            "tools": tools,
            "tool_names": frozenset(names),
            "last_input_tokens": rng.choice((None, None, rng.randrange(100, 8_000))),
            "overflow": rng.random() < 0.05,
            "reported_window": rng.choice((None,) * 8 + (4_000, 14_000)),
            "run_id": "run-1",
        }
        got = await fast.compact(request(entries, scratch=fast_scratch, **kwargs))
        want = await slow.compact(request(entries, scratch=slow_scratch, **kwargs))
        where = f"seed {seed}, step {n}"
        assert dump(got.entries) == dump(want.entries), where
        assert (got.changed, got.compacted, got.tokens_before, got.tokens_after) == (
            want.changed,
            want.compacted,
            want.tokens_before,
            want.tokens_after,
        ), where
        assert fast_scratch[SCRATCH_KEY] == slow_scratch[SCRATCH_KEY], where
        track = fast._tracks[("run", "run-1")]
        assert fast_scratch[SCRATCH_KEY] == track.state.to_dict(), where
