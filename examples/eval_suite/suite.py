"""A sample lovia eval suite that runs offline from recordings.

    uv run lovia eval examples/eval_suite/suite.py            # replay, print the report
    uv run lovia eval examples/eval_suite/suite.py --save report.json
    uv run python examples/eval_suite/suite.py --record       # re-record recordings/

``lovia eval`` looks for the attribute ``suite`` (here a function returning a ``Suite``, so
the recordings are read only when the suite runs). Every case replays a recording of a real
run, so the suite is deterministic and needs no network; the judge replays its own
recording too.

``--record`` runs each case once through a ``RecordingProvider`` and rewrites
``recordings/``. With ``LOVIA_MODEL`` set (and ``LOVIA_EVAL_JUDGE_MODEL`` for the judge) it
records those real models; without them it records the scripted stand-in replies in
``STAND_IN``, which is what this repository ships, because its CI has no network.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from lovia import Agent
from lovia.context_policy import NoopContextPolicy
from lovia.eval import (
    Check,
    Recording,
    RecordingProvider,
    ReplayProvider,
    Suite,
    contains,
    evaluate,
    llm_judge,
    max_turns,
    no_error,
    recorded_case,
    tool_called_with,
    tool_order,
)
from lovia.messages import Usage
from lovia.providers import provider_from_string
from lovia.providers.base import Provider
from lovia.testing import ScriptedProvider, call, text
from lovia.tools.base import tool

RECORDINGS = Path(__file__).resolve().parent / "recordings"
JUDGE_RECORDING = RECORDINGS / "judge.json"

_RATES = {"EUR": 1.0, "USD": 1.08, "JPY": 162.0, "GBP": 0.85}


@tool
def convert(amount: float, source: str, target: str) -> str:
    """Convert an amount of money between currencies (fixed rates, so replays are stable)."""
    value = amount / _RATES[source.upper()] * _RATES[target.upper()]
    return f"{amount:g} {source.upper()} = {value:.2f} {target.upper()}"


agent = Agent(
    "travel-money",
    instructions="You help travellers with money. Use the convert tool for every conversion.",
    tools=[convert],
    # Pinned: a recording holds the tools each request offered, and the default policy
    # (Compaction, when lovia-context is installed) adds its recall tool.
    context_policy=NoopContextPolicy(),
)

JUDGE_RUBRIC = "The answer states the converted amount and says clearly whether it is enough."

# name -> (input, checks other than the judge, whether the judge grades it)
CASES: dict[str, tuple[str, list[Check], bool]] = {
    "eur-to-jpy": (
        "How much is 100 EUR in yen?",
        [contains("16200"), tool_called_with("convert", {"source": "EUR", "target": "JPY"})],
        False,
    ),
    "lunch-budget": (
        "I have 20 euros. Is that enough for a 2500 yen lunch in Tokyo?",
        [tool_called_with("convert", {"amount": 2500}), no_error(), max_turns(3)],
        True,
    ),
    "two-step": (
        "Convert 50 USD to EUR, and then that amount of EUR to GBP.",
        [tool_order("convert", "convert"), contains("GBP")],
        False,
    ),
}

STAND_IN: dict[str, list[Any]] = {
    "eur-to-jpy": [
        call("convert", {"amount": 100, "source": "EUR", "target": "JPY"}, usage=Usage(180, 24)),
        text("100 EUR is 16200.00 JPY at today's rate.", usage=Usage(230, 14)),
    ],
    "lunch-budget": [
        call("convert", {"amount": 2500, "source": "JPY", "target": "EUR"}, usage=Usage(190, 25)),
        text("2500 JPY is about 15.43 EUR, so 20 euros is enough.", usage=Usage(240, 18)),
    ],
    "two-step": [
        call("convert", {"amount": 50, "source": "USD", "target": "EUR"}, usage=Usage(185, 24)),
        call("convert", {"amount": 46.3, "source": "EUR", "target": "GBP"}, usage=Usage(235, 24)),
        text("50 USD is 46.30 EUR, which is 39.35 GBP.", usage=Usage(280, 15)),
    ],
}
JUDGE_STAND_IN = '{"score": 0.9, "reasoning": "States 15.43 EUR and that 20 EUR is enough."}'


def price(usage: Usage) -> float:
    """What a run costs at $0.15 per million input tokens and $0.60 per million output."""
    return usage.input_tokens * 0.15e-6 + usage.output_tokens * 0.60e-6


def build_suite(judge_model: Provider) -> Suite:
    judge = llm_judge(JUDGE_RUBRIC, model=judge_model, name="judge: enough money?")
    cases = [
        recorded_case(
            RECORDINGS / f"{name}.json",
            [*checks, *([judge] if judged else [])],
            name=name,
            samples=3 if judged else 1,
        )
        for name, (_, checks, judged) in CASES.items()
    ]
    return Suite(agent=agent, cases=cases, concurrency=4, price=price)


def suite() -> Suite:
    """The suite ``lovia eval`` runs: every case and the judge replay their recordings."""
    return build_suite(ReplayProvider(Recording.load(JUDGE_RECORDING)))


async def record() -> None:
    """Run every case once against the configured models and rewrite ``recordings/``."""
    RECORDINGS.mkdir(exist_ok=True)
    live = os.environ.get("LOVIA_MODEL")
    for name, (prompt, _, _) in CASES.items():
        model = provider_from_string(live) if live else ScriptedProvider(STAND_IN[name])
        recorder = RecordingProvider(model)
        await agent.clone(model=recorder).run(prompt)
        recorder.recording.save(RECORDINGS / f"{name}.json")
    judge_live = os.environ.get("LOVIA_EVAL_JUDGE_MODEL")
    judge_model = (
        provider_from_string(judge_live) if judge_live else ScriptedProvider([text(JUDGE_STAND_IN)])
    )
    judge = RecordingProvider(judge_model)
    # One evaluation with the recording judge: it is asked once (the replays are identical).
    report = await evaluate(agent, build_suite(judge).cases[1:2], samples=1)
    judge.recording.save(JUDGE_RECORDING)
    print(report)


if __name__ == "__main__":
    if sys.argv[1:] != ["--record"]:
        sys.exit(f"usage: python {sys.argv[0]} --record   (run the suite with `lovia eval`)")
    asyncio.run(record())
