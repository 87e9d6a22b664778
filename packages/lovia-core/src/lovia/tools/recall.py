"""``recall_tool_result``: gives the model back a tool output the context policy compacted.

The view may replace a result with a marker; the transcript never loses it. Recall reads
the result store first (keyed by content digest, the reference an offload marker shows;
a ``call_id`` is turned into the digest its result was archived under when the policy
can say, so a call id still finds the full output after the stored transcript was
trimmed), then the run's transcript (``ctx.entries``) by ``call_id``, then by digest. It never
re-runs a tool, so a tool with side effects is never repeated. Every miss or store failure
ends in a readable message, never an exception.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from typing import TYPE_CHECKING, Any, Protocol

from ..transcript import ToolResultEntry
from .base import Tool

if TYPE_CHECKING:
    from ..run_context import RunContext

__all__ = [
    "ArchivedDigest",
    "RECALL_TOOL_NAME",
    "RecallStore",
    "make_recall_tool",
    "result_digest",
]

_log = logging.getLogger(__name__)

RECALL_TOOL_NAME = "recall_tool_result"


class RecallStore(Protocol):
    """The read side of a result store (``lovia.context.ResultStore`` satisfies it)."""

    def get(self, key: str) -> str | None: ...


def result_digest(output: str) -> str:
    """The content digest a result is archived under (sha256 of its UTF-8 text, hex)."""
    return hashlib.sha256(output.encode("utf-8", "surrogatepass")).hexdigest()


class ArchivedDigest(Protocol):
    """``(call_id, ctx) -> digest``: where a policy archived that call's output, if it did."""

    def __call__(self, call_id: str, ctx: RunContext[Any], /) -> str | None: ...


def make_recall_tool(
    store: RecallStore | None = None, *, archived: ArchivedDigest | None = None
) -> Tool:
    """Build the ``recall_tool_result(ref)`` tool over ``store`` (``None``: transcript only).

    ``ref`` is what a marker names: a ``call_id`` or a content digest. ``archived`` maps a
    ``call_id`` to the digest the policy archived its output under (``Compaction`` passes
    its offload records), so recall by call id reads the full output from ``store``.
    """

    async def invoke(args: dict[str, Any], ctx: RunContext[Any]) -> str:
        ref = args.get("ref")
        if not isinstance(ref, str) or not ref.strip():
            return "recall_tool_result needs ref: the call id or reference a marker names."
        ref = ref.strip()
        if store is not None:
            found = await _read(store, ref)
            digest = archived(ref, ctx) if found is None and archived is not None else None
            if digest is not None and digest != ref:
                found = await _read(store, digest)
            if found is not None:
                return found
        return _from_transcript(ref, ctx)

    return Tool(
        name=RECALL_TOOL_NAME,
        description=(
            "Retrieve the full output of an earlier tool call whose result was cleared or "
            "offloaded to save context. Pass the reference the marker names (a call id or "
            "an output reference). Does not re-run the tool."
        ),
        parameters={
            "type": "object",
            "properties": {
                "ref": {
                    "type": "string",
                    "description": "The call id or reference from the marker.",
                }
            },
            "required": ["ref"],
            "additionalProperties": False,
        },
        invoke=invoke,
    )


async def _read(store: RecallStore, key: str) -> str | None:
    try:
        return await asyncio.to_thread(store.get, key)
    except Exception:  # noqa: BLE001 - fail-open boundary: fall back to the transcript
        _log.warning("result store get failed for %r", key, exc_info=True)
        return None


def _from_transcript(ref: str, ctx: RunContext[Any]) -> str:
    entries = ctx.entries
    # Latest result with that call id first: call ids are the common reference.
    for e in reversed(entries):
        if isinstance(e, ToolResultEntry) and e.call_id == ref:
            return e.output
    if len(ref) == 64:
        for e in reversed(entries):
            if isinstance(e, ToolResultEntry) and result_digest(e.output) == ref:
                return e.output
    return f"No stored output for {ref!r}: nothing to recall (the tool was not re-run)."
