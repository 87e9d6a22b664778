"""The README quickstart: an agent with one typed tool.

Runs offline with a scripted model; set LOVIA_MODEL (e.g. "openai:gpt-4o-mini" with
OPENAI_API_KEY, or "anthropic:claude-sonnet-4-5" with ANTHROPIC_API_KEY) to use a real one.
"""

from __future__ import annotations

import os

from lovia import Agent, Runner, tool
from lovia.testing import ScriptedProvider, call, text


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def main() -> None:
    model = os.environ.get("LOVIA_MODEL") or ScriptedProvider(
        [call("add", {"a": 2, "b": 3}), text("2 + 3 = 5")]
    )
    agent = Agent(name="calculator", instructions="Use your tools.", model=model, tools=[add])
    result = Runner.run_sync(agent, "What is 2 + 3?")
    print(result.output)


if __name__ == "__main__":
    main()
