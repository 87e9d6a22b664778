"""``lovia.schema``: JSON Schema from signatures and types, and validation against them."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import Annotated, Any, Literal, Optional, Union

import pydantic
import pytest
from lovia.exceptions import InvalidToolArguments, UserError
from lovia.run_context import RunContext
from lovia.schema import (
    coerce_output,
    function_args_schema,
    model_json_schema,
    parse_docstring,
    strict_json_schema,
    validate_args,
)
from pydantic import BaseModel, Field
from typing_extensions import NotRequired, TypedDict


class Address(BaseModel):
    """Where someone lives."""

    street: str
    title: str = "home"


@dataclasses.dataclass
class Span:
    start: int
    end: int = 0


class Filters(TypedDict):
    tag: str
    limit: NotRequired[int]


def props(fn: Any, **kwargs: Any) -> dict[str, Any]:
    return function_args_schema(fn, **kwargs).parameters


# --- signatures -------------------------------------------------------------------------


def test_defaults_make_arguments_optional() -> None:
    def f(a: int, b: str = "x", c: float | None = None) -> None: ...

    assert props(f) == {
        "type": "object",
        "properties": {
            "a": {"type": "integer"},
            "b": {"type": "string", "default": "x"},
            "c": {"anyOf": [{"type": "number"}, {"type": "null"}], "default": None},
        },
        "required": ["a"],
    }


def test_annotated_string_becomes_the_description() -> None:
    def f(city: Annotated[str, "the city to look up"]) -> None: ...

    assert props(f)["properties"]["city"] == {
        "type": "string",
        "description": "the city to look up",
    }


def test_annotated_field_carries_constraints() -> None:
    def f(n: Annotated[int, Field(ge=1, le=10, description="how many")] = 3) -> None: ...

    assert props(f)["properties"]["n"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 10,
        "description": "how many",
        "default": 3,
    }


@pytest.mark.parametrize(
    "annotation",
    [
        Optional[Annotated[int, Field(ge=0, description="offset")]],
        Annotated[Optional[int], Field(ge=0, description="offset")],
    ],
    ids=["optional-outside", "annotated-outside"],
)
def test_optional_annotated_keeps_description_and_constraints(annotation: Any) -> None:
    def f(offset: int | None = None) -> None: ...

    f.__annotations__["offset"] = annotation
    prop = props(f)["properties"]["offset"]
    assert prop["description"] == "offset"
    assert {"type": "integer", "minimum": 0} in prop["anyOf"]
    assert "description" not in prop["anyOf"][0]


def test_optional_annotated_string_description_is_kept() -> None:
    def f(q: Optional[Annotated[str, "search text"]] = None) -> None: ...

    assert props(f)["properties"]["q"]["description"] == "search text"


def test_pydantic_model_argument_uses_defs_without_titles_but_keeps_a_title_field() -> None:
    def f(address: Address) -> None: ...

    schema = props(f)
    assert schema["properties"]["address"] == {"$ref": "#/$defs/Address"}
    assert schema["$defs"]["Address"] == {
        "type": "object",
        "description": "Where someone lives.",
        "properties": {
            "street": {"type": "string"},
            "title": {"type": "string", "default": "home"},
        },
        "required": ["street"],
    }


def test_dataclass_and_typeddict_arguments() -> None:
    def f(span: Span, filters: Filters) -> None: ...

    schema = props(f)
    assert schema["$defs"]["Span"] == {
        "type": "object",
        "properties": {"start": {"type": "integer"}, "end": {"type": "integer", "default": 0}},
        "required": ["start"],
    }
    assert schema["$defs"]["Filters"] == {
        "type": "object",
        "properties": {"tag": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["tag"],
    }


def test_literal_and_union_arguments() -> None:
    def f(mode: Literal["fast", "slow"], value: Union[int, str]) -> None: ...

    properties = props(f)["properties"]
    assert properties["mode"] == {"type": "string", "enum": ["fast", "slow"]}
    assert properties["value"] == {"anyOf": [{"type": "integer"}, {"type": "string"}]}


def test_user_argument_named_title_is_kept() -> None:
    def f(title: str) -> None: ...

    assert props(f)["properties"] == {"title": {"type": "string"}}


def test_argument_names_that_shadow_pydantic_attributes_work() -> None:
    def f(json: str, schema: int, model_config: bool = False) -> None: ...

    fs = function_args_schema(f)
    assert list(fs.parameters["properties"]) == ["json", "schema", "model_config"]
    assert validate_args(fs, {"json": "x", "schema": "2"}) == {
        "json": "x",
        "schema": 2,
        "model_config": False,
    }


def test_strict_closes_objects_and_requires_every_argument() -> None:
    def f(a: int, address: Address, b: str = "x") -> None: ...

    schema = props(f, strict=True)
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["a", "address", "b"]
    assert "default" not in schema["properties"]["b"]
    assert schema["$defs"]["Address"]["additionalProperties"] is False
    assert schema["$defs"]["Address"]["required"] == ["street", "title"]


def test_strict_with_an_open_ended_object_raises_user_error() -> None:
    def f(tags: dict[str, str]) -> None: ...

    with pytest.raises(UserError, match="cannot be strict") as info:
        function_args_schema(f, strict=True)
    assert info.value.hint is not None


def test_strict_validation_rejects_unknown_arguments() -> None:
    def f(a: int) -> None: ...

    with pytest.raises(InvalidToolArguments, match="zzz: Extra inputs are not permitted"):
        validate_args(function_args_schema(f, strict=True), {"a": 1, "zzz": 2})


def test_lenient_validation_ignores_unknown_arguments() -> None:
    def f(a: int) -> None: ...

    assert validate_args(function_args_schema(f), {"a": 1, "zzz": 2}) == {"a": 1}


def test_validation_builds_models_and_dataclasses() -> None:
    def f(address: Address, span: Span) -> None: ...

    values = validate_args(
        function_args_schema(f), {"address": {"street": "Main"}, "span": {"start": "1"}}
    )
    assert values == {"address": Address(street="Main"), "span": Span(start=1)}


def test_run_context_parameter_is_left_out_and_recorded() -> None:
    def f(run: RunContext[Any], q: str) -> None: ...

    fs = function_args_schema(f)
    assert fs.context_param == "run"
    assert fs.parameters["properties"] == {"q": {"type": "string"}}


def test_annotated_run_context_is_still_injected() -> None:
    def f(run: Annotated[RunContext[Any], "the run"], q: str) -> None: ...

    assert function_args_schema(f).context_param == "run"


def test_types_without_a_json_schema_raise_user_error() -> None:
    class Opaque:
        pass

    def f(x: int) -> None: ...

    f.__annotations__["x"] = Opaque
    with pytest.raises(UserError, match="cannot build a JSON Schema") as info:
        function_args_schema(f)
    assert info.value.hint is not None


# --- docstrings -------------------------------------------------------------------------

GOOGLE = """Fetch a page.

Args:
    url (str): the address
        to fetch.
    timeout: seconds to wait.

Returns:
    The body.
"""

NUMPY = """Fetch a page.

Parameters
----------
url : str
    the address
    to fetch.
timeout : float, optional
    seconds to wait.

Returns
-------
str
    The body.
"""

SPHINX = """Fetch a page.

:param str url: the address
    to fetch.
:param timeout: seconds to wait.
:returns: The body.
"""


@pytest.mark.parametrize("doc", [GOOGLE, NUMPY, SPHINX], ids=["google", "numpy", "sphinx"])
def test_docstring_styles_give_descriptions(doc: str) -> None:
    def fetch(url: str, timeout: float = 5.0) -> str:
        return url

    fetch.__doc__ = doc
    fs = function_args_schema(fetch)
    assert fs.description == "Fetch a page."
    assert fs.parameters["properties"]["url"]["description"] == "the address to fetch."
    assert fs.parameters["properties"]["timeout"]["description"] == "seconds to wait."


def test_annotated_description_wins_over_the_docstring() -> None:
    def f(q: Annotated[str, "from the annotation"]) -> None:
        """Do it.

        Args:
            q: from the docstring.
        """

    assert props(f)["properties"]["q"]["description"] == "from the annotation"


def test_prose_ending_in_a_colon_is_not_a_section() -> None:
    parsed = parse_docstring("Use it like this:\n\n    f(1)\n")
    assert parsed.description == "Use it like this:\n\n    f(1)"
    assert parsed.params == {}


# --- types ------------------------------------------------------------------------------


def test_model_json_schema_strips_titles() -> None:
    assert model_json_schema(list[Span]) == {
        "type": "array",
        "items": {"$ref": "#/$defs/Span"},
        "$defs": {
            "Span": {
                "type": "object",
                "properties": {
                    "start": {"type": "integer"},
                    "end": {"type": "integer", "default": 0},
                },
                "required": ["start"],
            }
        },
    }


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="pydantic takes typing.TypedDict on 3.12+")
def test_model_json_schema_rejects_typing_typeddict_with_a_hint() -> None:
    import typing

    class Legacy(typing.TypedDict):
        a: int

    with pytest.raises(UserError, match="cannot be used as a schema type") as info:
        model_json_schema(Legacy)
    assert info.value.hint is not None and "typing_extensions.TypedDict" in info.value.hint


def test_model_json_schema_rejects_a_type_without_json_schema_with_a_hint() -> None:
    with pytest.raises(UserError, match="cannot be used as a schema type") as info:
        model_json_schema(Callable[[int], int])
    assert info.value.hint is not None and "JSON-friendly types" in info.value.hint


def test_strict_json_schema_returns_none_for_open_dicts() -> None:
    assert strict_json_schema(model_json_schema(dict[str, int])) is None


def test_strict_json_schema_closes_nested_objects() -> None:
    strict = strict_json_schema(model_json_schema(Address))
    assert strict == {
        "type": "object",
        "description": "Where someone lives.",
        "properties": {"street": {"type": "string"}, "title": {"type": "string"}},
        "required": ["street", "title"],
        "additionalProperties": False,
    }


@pytest.mark.parametrize(
    ("tp", "value", "expected"),
    [
        (int, "3", 3),
        (list[int], ["1", 2], [1, 2]),
        (Literal["a", "b"], "b", "b"),
        (Span, {"start": 1}, Span(start=1)),
        (Filters, {"tag": "x"}, {"tag": "x"}),
        (Union[int, Address], {"street": "s"}, Address(street="s")),
    ],
    ids=["int", "list", "literal", "dataclass", "typeddict", "union"],
)
def test_coerce_output(tp: Any, value: Any, expected: Any) -> None:
    assert coerce_output(tp, value) == expected


def test_coerce_output_raises_validation_error() -> None:
    with pytest.raises(pydantic.ValidationError):
        coerce_output(Literal["a"], "z")


@pytest.mark.parametrize("args", [None, [], ""])
def test_a_no_parameter_tool_still_rejects_arguments_that_are_not_an_object(args: Any) -> None:
    # The no-argument fast path skips validation for {} only: anything else that is not an
    # object is refused as before it existed.
    def ping() -> str:
        return "pong"

    with pytest.raises(InvalidToolArguments):
        function_args_schema(ping).bind(args, None)
