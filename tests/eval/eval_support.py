"""Shared helpers for the eval tests: hand-built run results and scripted agents."""

from __future__ import annotations

from typing import Any

from lovia import Agent, RunResult
from lovia.messages import Usage
from lovia.testing import ScriptedProvider, text
from lovia.transcript import (
    AssistantTextEntry,
    InputEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
)


def result_of(
    output: Any = "",
    *,
    calls: list[tuple[str, str]] = (),  # type: ignore[assignment]  # (name, arguments JSON)
    errors: int = 0,
    turns: int = 1,
    tokens: tuple[int, int] = (0, 0),
    inputs: tuple[str, ...] = ("question",),
) -> RunResult[Any]:
    """A ``RunResult`` as a run would return it, built by hand for check tests."""
    entries: list[TranscriptEntry] = [InputEntry("user", q) for q in inputs]
    for i, (name, arguments) in enumerate(calls):
        entries.append(ToolCallEntry(f"c{i}", name, arguments))
        entries.append(
            ToolResultEntry(f"c{i}", "boom" if i < errors else "ok", is_error=i < errors)
        )
    entries.append(AssistantTextEntry(str(output)))
    return RunResult(
        output=output,
        entries=entries,
        final_agent=Agent("under-test"),
        usage=Usage(input_tokens=tokens[0], output_tokens=tokens[1], requests=turns),
        turns=turns,
    )


def replying(*replies: str) -> Any:
    """A per-sample provider factory: each sample gets a fresh script of ``replies``."""
    return lambda: ScriptedProvider([text(r) for r in replies])
