"""Follow-up suggestions: the exchange they see, parsing, and suggesters that misbehave."""

from __future__ import annotations

from typing import Any

import pytest
from lovia import Agent
from lovia.testing import ScriptedProvider, text
from lovia.transcript import (
    AssistantTextEntry,
    InputEntry,
    ReasoningEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
)
from lovia.web.followups import (
    MAX_FOLLOWUP_CHARS,
    FollowupRequest,
    Followups,
    generate_followups,
    last_exchange,
    parse_suggestions,
)

CHAT: list[TranscriptEntry] = [
    InputEntry("user", "old question"),
    AssistantTextEntry("old answer"),
    InputEntry("user", "What is the weather?"),
    ReasoningEntry("thinking about tools"),
    AssistantTextEntry("Let me check."),
    ToolCallEntry("c1", "get_weather", "{}"),
    ToolResultEntry("c1", "sunny"),
    AssistantTextEntry("It is sunny."),
]


def _pairs(messages: list[Any]) -> list[tuple[str, Any]]:
    return [(m.role, m.content) for m in messages]


def test_the_last_exchange_skips_tool_traffic_and_reasoning() -> None:
    assert _pairs(last_exchange(CHAT)) == [
        ("user", "What is the weather?"),
        ("assistant", "Let me check.\n\nIt is sunny."),
    ]


def test_an_unanswered_last_turn_is_skipped() -> None:
    unanswered: list[TranscriptEntry] = [
        *CHAT,
        InputEntry("user", "and tomorrow?"),
        ToolCallEntry("c2", "x", "{}"),
    ]
    assert _pairs(last_exchange(unanswered))[0] == ("user", "What is the weather?")
    assert last_exchange([InputEntry("user", "hello?")]) == []
    assert last_exchange([]) == []


def test_model_text_is_parsed_into_clean_lines_up_to_the_limit() -> None:
    sloppy = (
        "Sure! Here are some follow-ups:\n\n"
        "1. What about tomorrow?\n"
        "- **Will it rain?**\n"
        '* "How hot will it get?"\n'
        "4) What about tomorrow?\n"
        "• Should I bring a coat?\n"
    )
    assert parse_suggestions(sloppy) == [
        "What about tomorrow?",
        "Will it rain?",
        "How hot will it get?",
    ]
    assert parse_suggestions(sloppy, limit=5)[-1] == "Should I bring a coat?"
    long = parse_suggestions("x" * 1000)
    assert len(long[0]) == MAX_FOLLOWUP_CHARS and long[0].endswith("…")
    assert parse_suggestions("   \n\n") == []


async def test_generate_followups_asks_the_model_with_the_exchange() -> None:
    provider = ScriptedProvider([text("Will it rain?\nWhat about Lyon?")])
    request = FollowupRequest("s1", "helper", tuple(last_exchange(CHAT)))
    suggestions = await generate_followups(request, model=provider, instructions="Suggest.")
    assert suggestions == ["Will it rain?", "What about Lyon?"]
    sent = provider.calls[0]
    assert sent[0].role == "system" and sent[0].content == "Suggest."
    assert "What is the weather?" in sent[-1].content and "It is sunny." in sent[-1].content
    assert "get_weather" not in sent[-1].content


async def _raises(request: FollowupRequest) -> list[str]:
    raise RuntimeError("suggester is down")


@pytest.mark.parametrize(
    ("suggester", "expected"),
    [
        (lambda r: ["Next?", "  ", 42, None, "Next?", "Another one?"], ["Next?", "Another one?"]),
        (lambda r: "a bare string is not a list", []),
        (lambda r: {"suggestions": ["x"]}, []),
        (lambda r: None, []),
        (lambda r: b"bytes", []),
        (_raises, []),
        (lambda r: 1 / 0, []),
    ],
)
async def test_a_misbehaving_suggester_degrades_to_nothing(
    suggester: Any, expected: list[str]
) -> None:
    followups = Followups(suggester, agents={})
    assert await followups.suggest("s1", "helper", CHAT) == expected


async def test_an_async_suggester_gets_the_request() -> None:
    seen: list[FollowupRequest] = []

    async def suggest(request: FollowupRequest) -> list[str]:
        seen.append(request)
        return ["Tell me more"]

    assert await Followups(suggest, agents={}).suggest("s1", "helper", CHAT) == ["Tell me more"]
    assert seen[0].session_id == "s1" and seen[0].agent == "helper"
    assert _pairs(list(seen[0].messages))[1][0] == "assistant"


async def test_no_exchange_means_no_call() -> None:
    calls: list[FollowupRequest] = []

    def suggest(request: FollowupRequest) -> list[str]:
        calls.append(request)
        return ["x"]

    followups = Followups(suggest, agents={})
    assert await followups.suggest("s1", "helper", [InputEntry("user", "hi")]) == []
    assert calls == []


async def test_the_model_suggester_uses_the_agent_model_or_followup_model() -> None:
    own = ScriptedProvider([text("From the agent model?")])
    agents = {"helper": Agent(name="helper", model=own)}
    assert await Followups(True, agents=agents).suggest("s", "helper", CHAT) == [
        "From the agent model?"
    ]
    other = ScriptedProvider([text("From the followup model?")])
    assert await Followups(True, agents=agents, model=other).suggest("s", "helper", CHAT) == [
        "From the followup model?"
    ]
    failing = ScriptedProvider([RuntimeError("boom")])
    assert await Followups(True, agents=agents, model=failing).suggest("s", "helper", CHAT) == []
    assert await Followups(True, agents={}).suggest("s", "gone", CHAT) == []
