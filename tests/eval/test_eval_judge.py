"""llm_judge against scripted judge models: prompt, threshold, model choice, garbage replies."""

from __future__ import annotations

from typing import Any

import pytest
from lovia import Agent
from lovia.eval import Case, CheckResult, contains, evaluate, llm_judge, run_check
from lovia.exceptions import ProviderError, UserError
from lovia.messages import user
from lovia.providers.registry import register_provider
from lovia.testing import ScriptedProvider, text
from lovia.transcript import InputEntry

from .eval_support import replying, result_of

GOOD = '{"score": 0.9, "reasoning": "Names the capital correctly."}'


async def test_the_judge_grades_with_its_own_model_and_passes_at_the_threshold() -> None:
    judge_model = ScriptedProvider([text(GOOD)])
    check = llm_judge("Names the capital of France.", model=judge_model, threshold=0.9)
    got = await run_check(check, result_of("Paris"))
    assert got == CheckResult(
        "llm_judge('Names the capital of France.')", True, 0.9, "Names the capital correctly."
    )
    assert judge_model.settings[0] is not None and judge_model.settings[0].temperature == 0.0
    assert judge_model.tools == [()]  # the judge is offered no tool, not even a recall tool


async def test_a_score_below_the_threshold_fails() -> None:
    judge_model = ScriptedProvider([text('{"score": 0.4, "reasoning": "Vague."}')])
    got = await run_check(llm_judge("Be precise.", model=judge_model), result_of("maybe"))
    assert (got.passed, got.score, got.reason) == (False, 0.4, "Vague.")


async def test_the_prompt_carries_the_rubric_every_user_message_and_the_output() -> None:
    judge_model = ScriptedProvider([text(GOOD)])
    result = result_of("Paris, then Rome.", inputs=("Capital of France?", "And of Italy?"))
    await run_check(llm_judge("Both capitals named.", model=judge_model), result)
    (prompt,) = [e for e in judge_model.views[0] if isinstance(e, InputEntry) and e.role == "user"]
    assert prompt.content == (
        "## Rubric\nBoth capitals named.\n\n"
        "## User messages\n[user message 1]\nCapital of France?\n\n"
        "[user message 2]\nAnd of Italy?\n\n"
        "## Final answer\nParis, then Rome."
    )


async def test_the_judge_never_uses_the_model_of_the_agent_under_test() -> None:
    under_test = ScriptedProvider([text("Paris")])
    judge_model = ScriptedProvider([text(GOOD)])
    agent = Agent("a", model=under_test)
    case = Case([user("Capital of France?")], [llm_judge("Correct capital.", model=judge_model)])
    report = await evaluate(agent, [case])
    assert report.passed
    assert (len(under_test.calls), len(judge_model.calls)) == (1, 1)


def test_without_a_model_or_the_env_var_the_judge_is_a_user_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("LOVIA_EVAL_JUDGE_MODEL", raising=False)
    with pytest.raises(UserError, match="llm_judge\\(\\) has no model") as info:
        llm_judge("Anything.")
    assert info.value.hint is not None and "LOVIA_EVAL_JUDGE_MODEL" in info.value.hint


async def test_the_env_var_names_the_judge_model(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []

    def factory(model: str, **kwargs: Any) -> ScriptedProvider:
        built.append(model)
        return ScriptedProvider([text(GOOD)], model=model)

    register_provider("evaljudgetest", factory)
    monkeypatch.setenv("LOVIA_EVAL_JUDGE_MODEL", "evaljudgetest:grader-1")
    got = await run_check(llm_judge("Correct."), result_of("Paris"))
    assert got.passed and built == ["grader-1"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rubric": "  "}, "the rubric is empty"),
        ({"rubric": "ok", "threshold": 1.2}, r"threshold must be a number in \[0, 1\]"),
    ],
    ids=["empty-rubric", "threshold"],
)
def test_rubric_and_threshold_are_validated(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(UserError, match=message):
        llm_judge(model=ScriptedProvider([]), **kwargs)


async def test_output_repair_applies_to_the_judge() -> None:
    judge_model = ScriptedProvider([text("It is great!"), text(GOOD)])
    got = await run_check(llm_judge("Correct.", model=judge_model), result_of("Paris"))
    assert got.passed and len(judge_model.calls) == 2


async def test_a_judge_returning_garbage_fails_only_its_check() -> None:
    garbage = ScriptedProvider([text("It is great!"), text('{"score": "high"}')])
    case = Case(
        "Capital of France?",
        [llm_judge("Correct.", model=garbage, name="judge"), contains("Paris")],
        model=replying("Paris"),
    )
    (result,) = (await evaluate(Agent("a"), [case])).cases
    judge, plain = result.samples[0].checks
    assert (judge.name, judge.passed) == ("judge", False)
    assert judge.reason.startswith("the judge failed: OutputValidationError")
    assert plain.passed


async def test_a_judge_provider_error_fails_only_its_check() -> None:
    down = ScriptedProvider([ProviderError("judge endpoint down", retryable=False)])
    got = await run_check(llm_judge("Correct.", model=down), result_of("Paris"))
    assert not got.passed
    assert got.reason.startswith("the judge failed: ProviderError: judge endpoint down")
