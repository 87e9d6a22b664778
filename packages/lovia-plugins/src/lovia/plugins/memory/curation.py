"""The LLM side of memory: side queries for the digest, dreaming and the recall pipeline.

Every side query is a one-turn run of a fresh agent with no tools and no plugins at
temperature 0, so it cannot recurse into memory and cannot act. Replies are parsed
leniently (a JSON object anywhere in the text, code fences allowed); a reply that does not
parse raises ``ValueError`` and the caller fails open.

Admission is strict on purpose: the notes are always in the prompt, so a note must be a
short, durable, standalone fact. The prompt asks for that and ``admit`` enforces it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lovia.transcript import AssistantTextEntry, InputEntry, ToolCallEntry, TranscriptEntry

from .index import Hit
from .notes import Note, normalise_fact

__all__ = [
    "Digest",
    "admit",
    "digest_run",
    "expand_query",
    "render_hits",
    "render_transcript",
    "rewrite_notes",
    "side_query",
    "summarize_hits",
]

MAX_FACT_CHARS = 200
MAX_FACTS_PER_RUN = 5
_TRANSCRIPT_CHARS = 60_000

_DIGEST = """You curate an assistant's long-term memory. Read the conversation and the
current notes. Reply with one JSON object and nothing else:
{"remember": [...], "retire": [...], "summary": "..."}
- remember: at most 5 NEW facts that will still matter in future conversations (the user's
  stable preferences, names, decisions, long-lived project facts). Each one short, standalone
  and in the third person. Never store secrets, passing requests, small talk, or anything
  already in the notes. When in doubt, leave it out; an empty list is normal.
- retire: notes (copied exactly) that the conversation proved false or obsolete.
- summary: two or three sentences on what this conversation was about and what was decided."""

_DREAM = """You consolidate an assistant's long-term notes. Merge duplicates, drop notes that are
obsolete or contradicted by newer ones (keep the newest), and keep every distinct durable fact.
Stay under {budget} characters in total. Reply with one JSON object and nothing else:
{{"notes": [{{"month": "YYYY-MM", "fact": "..."}}, ...]}}"""

_EXPAND = """Rewrite a memory search query for a keyword index. Reply with one line of search
terms only: the original words, synonyms, and translations into English and the user's language."""

_SUMMARIZE = """Answer from the retrieved memories only. Quote dates when they matter, say when
the memories do not answer the question, and keep it short."""


@dataclass(frozen=True, slots=True)
class Digest:
    """What one run's digest proposes."""

    remember: list[str]
    retire: list[str]
    summary: str


async def side_query(model: Any, instructions: str, prompt: str) -> str:
    """One tool-less, plugin-less turn at temperature 0; returns the reply text."""
    from lovia.agent import Agent
    from lovia.context_policy import NoopContextPolicy
    from lovia.providers.base import ModelSettings
    from lovia.runner import Runner

    agent: Agent[None] = Agent(
        name="memory-curator",
        instructions=instructions,
        model=model,
        settings=ModelSettings(temperature=0),
    )
    result = await Runner.run(agent, prompt, max_turns=1, context_policy=NoopContextPolicy())
    return str(result.output)


def _json_object(reply: str) -> dict[str, Any]:
    match = re.search(r"\{.*\}", reply, re.S)
    if match is None:
        raise ValueError(f"no JSON object in the reply: {reply[:200]!r}")
    data = json.loads(match.group())
    if not isinstance(data, dict):
        raise ValueError("the reply is not a JSON object")
    return data


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def render_transcript(entries: Sequence[TranscriptEntry]) -> str:
    """User and assistant text (and tool names) as plain lines; the tail when too long."""
    lines = []
    for entry in entries:
        if isinstance(entry, InputEntry) and entry.role == "user":
            content = entry.content if isinstance(entry.content, str) else "[non-text input]"
            lines.append(f"user: {content}")
        elif isinstance(entry, AssistantTextEntry) and entry.content:
            lines.append(f"assistant: {entry.content}")
        elif isinstance(entry, ToolCallEntry):
            lines.append(f"(assistant used the tool {entry.name})")
    text = "\n".join(lines)
    return text[-_TRANSCRIPT_CHARS:]


async def digest_run(model: Any, entries: Sequence[TranscriptEntry], notes: list[Note]) -> Digest:
    """Ask the model what this run teaches; raises ``ValueError`` for a reply that won't parse."""
    current = "\n".join(f"- {n.fact}" for n in notes) or "(none)"
    prompt = f"Current notes:\n{current}\n\nConversation:\n{render_transcript(entries)}"
    data = _json_object(await side_query(model, _DIGEST, prompt))
    summary = data.get("summary")
    return Digest(
        remember=_strings(data.get("remember")),
        retire=_strings(data.get("retire")),
        summary=summary.strip() if isinstance(summary, str) else "",
    )


def admit(facts: Sequence[str], existing: Sequence[Note]) -> list[str]:
    """The facts fit to keep: one short line each, new, not a question, at most five."""
    seen = {normalise_fact(n.fact).casefold() for n in existing}
    out = []
    for fact in facts:
        text = normalise_fact(fact)
        key = text.casefold()
        if not text or len(text) > MAX_FACT_CHARS or "\n" in fact.strip() or text.endswith("?"):
            continue
        if key in seen:
            continue
        seen.add(key)
        out.append(text)
    return out[:MAX_FACTS_PER_RUN]


async def rewrite_notes(model: Any, notes: list[Note], budget: int) -> list[Note]:
    """The consolidated notes the model proposes (possibly empty: the caller keeps the old)."""
    listing = "\n".join(f"- [{n.month}] {n.fact}" for n in notes)
    data = _json_object(await side_query(model, _DREAM.format(budget=budget), listing))
    raw = data.get("notes")
    out = []
    for item in raw if isinstance(raw, list) else []:
        if isinstance(item, dict) and isinstance(item.get("fact"), str):
            month = item.get("month")
            ok = isinstance(month, str) and re.fullmatch(r"\d{4}-\d{2}", month)
            out.append(Note(item["fact"], month if ok else ""))  # type: ignore[arg-type]
        elif isinstance(item, str):
            out.append(Note(item))
    return out


async def expand_query(model: Any, query: str) -> str:
    """The query plus the model's synonyms and translations, as one line of terms."""
    reply = await side_query(model, _EXPAND, query)
    extra = " ".join(reply.split())
    return f"{query} {extra}" if extra else query


async def summarize_hits(model: Any, query: str, hits: Sequence[Hit]) -> str:
    """The model's answer to ``query`` from ``hits``."""
    prompt = f"Question: {query}\n\nRetrieved memories:\n{render_hits(hits)}"
    return (await side_query(model, _SUMMARIZE, prompt)).strip()


def render_hits(hits: Sequence[Hit]) -> str:
    """One line per hit: ``- [when] (role) text``."""
    lines = []
    for hit in hits:
        when = (hit.doc.when or "")[:10]
        role = hit.doc.meta.get("role") or hit.doc.meta.get("kind") or ""
        text = " ".join(hit.doc.text.split())
        parts = (f"[{when}]" if when else "", f"({role})" if role else "", text)
        lines.append("- " + " ".join(p for p in parts if p))
    return "\n".join(lines)
