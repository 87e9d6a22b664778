"""``lovia.output``: structured-output contract, lenient parsing and repair strategies."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Literal

import pytest
from lovia import Agent, Runner
from lovia.exceptions import OutputValidationError, UserError
from lovia.output import (
    DefaultOutputRepair,
    OutputRepairStrategy,
    format_output_instructions,
    is_text_output,
    loads_lenient,
    parse_structured_output,
    resolve_output_repair,
    response_format_for,
)
from lovia.testing import ScriptedProvider, text
from pydantic import BaseModel
from typing_extensions import TypedDict


class Weather(BaseModel):
    city: str
    celsius: float
    note: str | None = None


@dataclasses.dataclass
class Pair:
    left: int
    right: int


class Row(TypedDict):
    key: str


# --- contract ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tp", "expected"),
    [(str, True), (None, True), (int, False), (Weather, False), (list[str], False)],
    ids=["str", "none", "int", "model", "list"],
)
def test_is_text_output(tp: Any, expected: bool) -> None:
    assert is_text_output(tp) is expected


def test_response_format_for_a_model_is_strict_and_closed() -> None:
    assert response_format_for(Weather) == {
        "type": "json_schema",
        "json_schema": {
            "name": "Weather",
            "strict": True,
            "schema": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "celsius": {"type": "number"},
                    "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                },
                "required": ["city", "celsius", "note"],
                "additionalProperties": False,
            },
        },
    }


def test_response_format_wraps_non_object_types() -> None:
    fmt = response_format_for(list[int])
    assert fmt["json_schema"]["schema"] == {
        "type": "object",
        "properties": {"response": {"type": "array", "items": {"type": "integer"}}},
        "required": ["response"],
        "additionalProperties": False,
    }
    assert fmt["json_schema"]["strict"] is True


def test_response_format_wrapping_keeps_defs_at_the_root() -> None:
    schema = response_format_for(list[Pair])["json_schema"]["schema"]
    assert schema["properties"]["response"]["items"] == {"$ref": "#/$defs/Pair"}
    assert set(schema["$defs"]) == {"Pair"}


def test_response_format_for_an_open_dict_is_not_strict() -> None:
    fmt = response_format_for(dict[str, int])
    assert fmt["json_schema"]["strict"] is False
    assert fmt["json_schema"]["schema"] == {
        "type": "object",
        "additionalProperties": {"type": "integer"},
    }


def test_output_instructions_embed_the_schema() -> None:
    text = format_output_instructions(Pair)
    header, _, schema = text.rpartition("\n")
    assert header.startswith("# Output format\nYour final answer must be a JSON object,")
    assert json.loads(schema) == {
        "type": "object",
        "properties": {"left": {"type": "integer"}, "right": {"type": "integer"}},
        "required": ["left", "right"],
    }


def test_output_instructions_for_wrapped_types_name_the_key() -> None:
    text = format_output_instructions(Literal["yes", "no"])
    assert 'whose "response" key holds the answer' in text
    assert json.loads(text.rpartition("\n")[2])["properties"]["response"] == {
        "type": "string",
        "enum": ["yes", "no"],
    }


# --- lenient parsing --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('  {"a": 1} ', {"a": 1}),
        ("[1, 2]", [1, 2]),
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ('Here you go:\n```\n{"a": 2}\n```\nDone.', {"a": 2}),
        ('The answer is {"a": {"b": "}"}} as requested.', {"a": {"b": "}"}}),
        ("Values: [3, 4] and more", [3, 4]),
        ('Use {braces} like {"a": 5}.', {"a": 5}),
        ("7", 7),
    ],
    ids=["raw", "array", "fence-json", "fence-in-prose", "prose-object", "prose-array",
         "skip-invalid", "scalar"],
)  # fmt: skip
def test_loads_lenient(text: str, expected: Any) -> None:
    assert loads_lenient(text) == expected


@pytest.mark.parametrize(
    "text",
    ["", "no json here", "{broken", "[" * 100_000, "```\n" + "[" * 100_000 + "\n```"],
    ids=["empty", "prose", "bad", "absurdly-deep", "absurdly-deep-fenced"],
)
def test_loads_lenient_raises_when_nothing_decodes(text: str) -> None:
    with pytest.raises(ValueError, match="no JSON value found"):
        loads_lenient(text)


# --- parse_structured_output ------------------------------------------------------------


def test_text_output_is_returned_untouched() -> None:
    assert parse_structured_output("  {not parsed} ", str) == "  {not parsed} "


@pytest.mark.parametrize(
    ("text", "tp", "expected"),
    [
        ('```json\n{"city": "Oslo", "celsius": "3.5"}\n```', Weather,
         Weather(city="Oslo", celsius=3.5)),
        ('{"left": 1, "right": 2}', Pair, Pair(1, 2)),
        ('{"key": "k"}', Row, {"key": "k"}),
        ('{"response": [1, 2]}', list[int], [1, 2]),
        ("Sure: [1, 2]", list[int], [1, 2]),
        ('{"response": "no"}', Literal["yes", "no"], "no"),
        ("yes", Literal["yes", "no"], "yes"),
        ("42", int, 42),
        ('{"response": true}', bool, True),
        ('{"a": 1}', dict[str, int], {"a": 1}),
    ],
    ids=["model-fenced", "dataclass", "typeddict", "wrapped-list", "bare-list", "wrapped-literal",
         "bare-literal", "int", "bool", "dict"],
)  # fmt: skip
def test_parse_structured_output(text: str, tp: Any, expected: Any) -> None:
    assert parse_structured_output(text, tp) == expected


def test_invalid_output_raises_with_raw_and_type_name() -> None:
    with pytest.raises(OutputValidationError) as info:
        parse_structured_output('{"city": "Oslo"}', Weather)
    exc = info.value
    assert exc.message == "the final output does not match Weather: celsius: Field required"
    assert (exc.raw, exc.output_type_name) == ('{"city": "Oslo"}', "Weather")
    assert exc.hint == "reply with only the JSON value the output format asks for"


@pytest.mark.parametrize("text", ["", "I cannot answer that."], ids=["empty", "prose"])
def test_reply_without_json_raises(text: str) -> None:
    with pytest.raises(OutputValidationError, match="the reply contains no JSON"):
        parse_structured_output(text, Weather)


def test_absurdly_deep_reply_is_an_output_validation_error() -> None:
    with pytest.raises(OutputValidationError, match="the reply contains no JSON"):
        parse_structured_output('{"a": ' * 100_000, Weather)


def test_empty_reply_for_a_wrapped_type_raises() -> None:
    with pytest.raises(OutputValidationError, match="no JSON"):
        parse_structured_output("  ", list[int])


def test_raw_snippet_is_capped() -> None:
    text = '{"city": 1, "pad": "' + "x" * 2000 + '"}'
    with pytest.raises(OutputValidationError) as info:
        parse_structured_output(text, Weather)
    assert info.value.raw == text[:500] + "..."


# --- repair -----------------------------------------------------------------------------


def _error() -> OutputValidationError:
    return OutputValidationError("the final output does not match Weather: celsius: missing")


def test_default_repair_quotes_the_error_once() -> None:
    repair = DefaultOutputRepair()
    prompt = repair.build_prompt(_error(), 1)
    assert prompt == (
        "Your previous reply could not be used as the final answer: "
        "the final output does not match Weather: celsius: missing\n"
        "Reply again with only a JSON value that follows the output format, with no other text."
    )
    assert repair.build_prompt(_error(), 2) is None


def test_default_repair_honours_max_attempts() -> None:
    repair = DefaultOutputRepair(max_attempts=3)
    assert [repair.build_prompt(_error(), n) is not None for n in (1, 2, 3, 4)] == [
        True,
        True,
        True,
        False,
    ]


class StopAtOnce:
    def build_prompt(self, exc: OutputValidationError, attempt: int) -> str | None:
        return None


def test_resolve_output_repair() -> None:
    custom = StopAtOnce()
    assert resolve_output_repair(True) == DefaultOutputRepair(max_attempts=1)
    assert resolve_output_repair(False) is None
    assert resolve_output_repair(None) is None
    assert resolve_output_repair(custom) is custom
    assert isinstance(custom, OutputRepairStrategy)


def test_resolve_output_repair_rejects_other_values() -> None:
    with pytest.raises(UserError, match="output_repair must be") as info:
        resolve_output_repair("yes")  # type: ignore[arg-type]  # the mistake under test
    assert info.value.hint == "pass an object with a build_prompt(exc, attempt) method"


# --- inside a run -----------------------------------------------------------------------


async def tools_offered_for_text_output() -> list[tuple[str, ...]]:
    """What a plain-text run offers: structured output must add no tool to it."""
    provider = ScriptedProvider([text("plain")])
    await Runner.run(Agent(name="a", model=provider), "go")
    return provider.tools


async def test_native_provider_gets_the_response_format_and_no_prompt_block() -> None:
    provider = ScriptedProvider([text('{"left": 1, "right": 2}')], supports_json_schema=True)
    result = await Runner.run(Agent(name="a", model=provider, output_type=Pair), "go")
    assert result.output == Pair(1, 2)
    assert provider.response_formats == [response_format_for(Pair)]
    assert all("# Output format" not in str(m.content) for m in provider.calls[0])
    assert provider.tools == await tools_offered_for_text_output()


async def test_fallback_provider_gets_the_output_block_in_the_system_prompt() -> None:
    provider = ScriptedProvider([text('Here: {"response": [1, 2]}')])
    result = await Runner.run(Agent(name="a", model=provider, output_type=list[int]), "go")
    assert result.output == [1, 2]
    system = provider.calls[0][0]
    assert (system.role, system.content) == ("system", format_output_instructions(list[int]))
    assert provider.response_formats == [None]
    assert provider.tools == await tools_offered_for_text_output()
