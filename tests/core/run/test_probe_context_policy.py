"""A custom ContextPolicy that returns garbage fails with a UserError naming the contract.

Issue 20 item 12: the policy's result is validated. A ``ContextResult`` whose ``entries``
is not a sequence of transcript entries must not reach a provider (where it becomes an
``AttributeError`` deep in a request builder, or a silently wrong request).
"""

from __future__ import annotations

from typing import Any

import pytest
from lovia import Agent, Runner
from lovia.context_policy import CompactionRequest, ContextResult
from lovia.exceptions import UserError
from lovia.testing import ScriptedProvider, text


class _Returns:
    def __init__(self, entries: Any) -> None:
        self.entries = entries

    async def compact(self, req: CompactionRequest) -> ContextResult:
        return ContextResult(entries=self.entries, changed=True)


@pytest.mark.parametrize(
    "entries",
    [None, "not entries", [{"role": "user", "content": "hi"}], (1, 2), 42],
    ids=["none", "str", "dicts", "ints", "int"],
)
async def test_a_policy_view_that_is_not_transcript_entries_is_a_user_error(
    entries: Any,
) -> None:
    provider = ScriptedProvider([text("never sent")])
    agent = Agent("c", model=provider)
    with pytest.raises(UserError, match="compact") as caught:
        await Runner.run(agent, "hi", context_policy=_Returns(entries))
    assert "ContextResult" in (caught.value.hint or "")
    assert len(provider.unused_steps) == 1  # nothing reached the provider


async def test_a_policy_view_made_of_entries_is_accepted() -> None:
    class Trimming:
        async def compact(self, req: CompactionRequest) -> ContextResult:
            return ContextResult(entries=list(req.entries)[-1:], changed=True)

    provider = ScriptedProvider([text("ok")])
    result = await Runner.run(Agent("c", model=provider), "hi", context_policy=Trimming())
    assert result.output == "ok"
