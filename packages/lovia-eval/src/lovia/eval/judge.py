"""``llm_judge``: a check that asks a model to grade a sample against a rubric.

Underneath is a plain ``Agent(output_type=Verdict)`` at temperature 0, so the reply goes
through lovia's structured-output parsing and its repair turn. The judge's model comes from
``model=`` or ``LOVIA_EVAL_JUDGE_MODEL``, never from the agent under test (a model grading
itself is a conflict of interest). The prompt carries the rubric, every user input of the
run and the final output. Any failure of the judge (a provider error, a reply that is not a
``Verdict`` even after repair) fails only that check, with the error as the reason.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from lovia.exceptions import LoviaError, UserError
from lovia.parts import text_of
from lovia.providers.base import ModelSettings
from lovia.transcript import InputEntry
from pydantic import BaseModel, Field

from .checks import CheckResult, Matcher, _check_unit, output_text

if TYPE_CHECKING:
    from lovia.providers.base import Provider
    from lovia.runtime.result import RunResult

__all__ = [
    "JUDGE_MODEL_ENV",
    "Verdict",
    "judge_prompt",
    "llm_judge",
]

JUDGE_MODEL_ENV = "LOVIA_EVAL_JUDGE_MODEL"
"""The environment variable naming the judge's model when ``model=`` is not given."""

_INSTRUCTIONS = (
    "You are a strict evaluator. Grade the assistant's final answer against the rubric. "
    "Score from 0.0 (fails the rubric entirely) to 1.0 (fully satisfies it), and explain "
    "your reasoning in one or two sentences."
)


class Verdict(BaseModel):
    """The judge's structured reply: a score in ``[0, 1]`` and the reasoning behind it."""

    score: float = Field(ge=0.0, le=1.0)
    reasoning: str


def llm_judge(
    rubric: str,
    *,
    model: Provider | str | None = None,
    threshold: float = 0.7,
    name: str | None = None,
) -> Matcher:
    """A check graded by a model: passes when the verdict's score reaches ``threshold``.

    ``model`` is a ``Provider`` or a model string; ``None`` reads ``LOVIA_EVAL_JUDGE_MODEL``.
    Raises ``UserError`` here when neither names a model, when the rubric is empty, or when
    ``threshold`` is outside ``[0, 1]``.
    """
    from lovia.agent import Agent
    from lovia.context_policy import NoopContextPolicy

    if not rubric.strip():
        raise UserError("llm_judge(): the rubric is empty", hint="say what a good answer does")
    _check_unit("llm_judge(): threshold", threshold)
    judge_model = model if model is not None else os.environ.get(JUDGE_MODEL_ENV) or None
    if judge_model is None:
        raise UserError(
            "llm_judge() has no model",
            hint=f"pass model='vendor:model' or set {JUDGE_MODEL_ENV}; the judge never "
            "borrows the model of the agent under test",
        )
    judge = Agent(
        "judge",
        instructions=_INSTRUCTIONS,
        model=judge_model,
        output_type=Verdict,
        settings=ModelSettings(temperature=0.0),
        # A one-turn grading call needs no compaction, and the default policy would offer
        # the judge a recall tool (and make its requests depend on what is installed).
        context_policy=NoopContextPolicy(),
    )
    label = name or f"llm_judge({rubric[:40]!r})"

    async def check(result: RunResult[Any]) -> CheckResult:
        try:
            graded = await judge.run(judge_prompt(rubric, result))
        except LoviaError as exc:
            return CheckResult(label, False, 0.0, f"the judge failed: {type(exc).__name__}: {exc}")
        verdict: Verdict = graded.output
        passed = verdict.score >= threshold
        return CheckResult(label, passed, verdict.score, verdict.reasoning)

    return Matcher(label, check)


def judge_prompt(rubric: str, result: RunResult[Any]) -> str:
    """The text the judge is sent: the rubric, every user input of the run, and the output."""
    inputs = [
        text_of(e.content) for e in result.entries if isinstance(e, InputEntry) and e.role == "user"
    ]
    conversation = "\n\n".join(f"[user message {i}]\n{t}" for i, t in enumerate(inputs, 1))
    return (
        f"## Rubric\n{rubric}\n\n## User messages\n{conversation or '(none)'}\n\n"
        f"## Final answer\n{output_text(result.output)}"
    )
