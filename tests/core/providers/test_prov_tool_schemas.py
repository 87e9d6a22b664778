"""The neutral ``Tool`` knows no wire format (issue 11.3): each adapter frames the same
declaration, and token counting measures ``Tool.schema_json()``."""

from __future__ import annotations

import json
from typing import Any

from lovia import tool
from lovia.providers.anthropic import AnthropicProvider
from lovia.providers.openai_chat import OpenAIChatProvider, openai_tool_schema
from lovia.providers.openai_responses import OpenAIResponsesProvider
from lovia.tools.base import Tool
from lovia.transcript import InputEntry

LOCAL = "http://127.0.0.1:9/v1"


@tool(strict=True)
def lookup(query: str, limit: int = 3) -> str:
    """Find things."""
    return query * limit


def declaration(spec: dict[str, Any]) -> dict[str, Any]:
    inner = spec.get("function", spec)
    return {
        "name": inner["name"],
        "description": inner["description"],
        "parameters": inner.get("parameters", inner.get("input_schema")),
    }


def test_every_adapter_sends_the_declaration_schema_json_states() -> None:
    neutral = json.loads(lookup.schema_json())
    assert neutral == {
        "name": "lookup",
        "description": "Find things.",
        "parameters": lookup.parameters,
    }
    view = [InputEntry("user", "q")]
    for provider in (
        OpenAIChatProvider("m", base_url=LOCAL),
        OpenAIResponsesProvider("m", base_url=LOCAL),
        AnthropicProvider("m", base_url="http://127.0.0.1:9"),
    ):
        (spec,) = provider.build_request(view, tools=[lookup])["tools"]
        assert declaration(spec) == neutral, type(provider).__name__
    assert openai_tool_schema(lookup)["function"]["strict"] is True
    assert not hasattr(Tool, "openai_schema")
