"""Summary prompt templates and the background-reference wrapper.

Customise through ``LLMSummarizer(prompt=..., required_sections=...)`` rather than by
forking the summariser. ``SUMMARY_WRAPPER`` frames the summary in the view as background
reference, so the model does not read it as a new instruction from the user.
"""

from __future__ import annotations

__all__ = [
    "FOLD_TEMPLATE",
    "REQUIRED_SECTIONS",
    "SUMMARY_SYSTEM_PROMPT",
    "SUMMARY_WRAPPER",
]

REQUIRED_SECTIONS: tuple[str, ...] = (
    "Session intent",
    "Current state",
    "Key facts",
    "Artifacts",
    "Constraints",
    "Next steps",
)
"""The sections every summary must contain, as ``## <name>`` headings, in this order."""

SUMMARY_SYSTEM_PROMPT = """\
You maintain the running summary of a long conversation between a user and an AI agent \
that uses tools. The summary replaces the summarised turns in the agent's context, so it \
must keep everything the agent needs to continue the work: decisions, facts learned from \
tool results, names, paths, identifiers, numbers and open questions. Drop chit-chat and \
repetition. Write in the conversation's language. Do not invent anything.

Answer with the summary only, using exactly these Markdown sections, in order:
{sections}

Write "none" under a section that has nothing to say."""
"""System prompt of the summarisation call; ``{sections}`` lists ``REQUIRED_SECTIONS``."""

FOLD_TEMPLATE = """\
{previous_block}Conversation to fold into the summary:
<conversation>
{conversation}
</conversation>

Return the updated summary, with every required section."""
"""User message of one fold: the previous summary (if any) and the new span as text."""

SUMMARY_WRAPPER = """\
[Background reference: a summary of the earlier part of this conversation, written to save \
context. It is not a new request; continue from the messages that follow it.]

{summary}"""
"""How the summary appears in the view; ``{summary}`` is the summary text."""
