"""The pydantic-free schema path writes exactly what pydantic writes, and hands off the rest.

``lovia.schema`` builds plain-typed argument schemas itself (so defining tools does not load
pydantic); these tests pin that the bytes are pydantic's, over a corpus of annotations and
defaults, and that anything it does not know goes to pydantic.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from typing import Annotated, Any, Literal, NewType, Optional, Union

import pytest
from lovia.schema import (
    _Argument,
    _build_model,
    _model_parameters,
    _plain_parameters_schema,
    function_args_schema,
)
from pydantic import Field


class Color(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Point:
    x: int


UserId = NewType("UserId", int)

PLAIN: list[tuple[Any, Any]] = [
    (int, ...),
    (str, "x"),
    (float, 1.5),
    (float, 2),
    (bool, False),
    (type(None), None),
    (Any, ...),
    (Any, None),
    (list, ...),
    (list[int], ...),
    (list[list[str]], None),
    (list[Any], ...),
    (dict, None),
    (dict[str, int], ...),
    (dict[str, list[float]], ...),
    (Optional[int], None),
    (Optional[int], 3),
    (int | None, None),
    (int | str, 1),
    (Union[int, str, None], None),
    (float | int, 0),
    (list[int] | None, None),
    (Literal["a", "b"], "a"),
    (Literal[1, 2, 3], ...),
    (list[Literal["x", "y"]], ...),
    (Annotated[int, "how many"], 1),
    (Annotated[str, "a name"], ...),
]

RICH: list[tuple[Any, Any]] = [
    (Color, ...),
    (Point, ...),
    (UserId, ...),
    (tuple[int, str], (1, "a")),
    (dict[str, Any], ...),
    (dict[int, str], ...),
    (Literal["only"], ...),
    (Literal[True, False], ...),
    (Literal["a", 1], ...),
    (Optional[Annotated[int, "inside"]], None),
    (Annotated[int, Field(ge=0)], 0),
    (list[int], []),  # a list default: pydantic serialises it
    (float, float("inf")),
    (set[int], ...),
    (bytes, ...),
]


def _arguments(annotation: Any, default: Any, description: str | None) -> list[_Argument]:
    return [
        _Argument("first", "p0", int, ..., None),
        _Argument("value", "p1", annotation, default, description),
    ]


@pytest.mark.parametrize("strict", [False, True], ids=["lax", "strict"])
@pytest.mark.parametrize("description", [None, "what it is"], ids=["bare", "described"])
@pytest.mark.parametrize(("annotation", "default"), PLAIN, ids=[repr(a) for a, _ in PLAIN])
def test_plain_types_give_pydantic_s_exact_schema(
    annotation: Any, default: Any, description: str | None, strict: bool
) -> None:
    arguments = _arguments(annotation, default, description)
    fast = _plain_parameters_schema(arguments, strict=strict)
    assert fast is not None, "this annotation should not need pydantic"
    slow = _model_parameters("f", _build_model("f", arguments, strict))
    assert json.dumps(fast) == json.dumps(slow)  # same keys, values and order


@pytest.mark.parametrize(("annotation", "default"), RICH, ids=[repr(a) for a, _ in RICH])
def test_richer_types_are_left_to_pydantic(annotation: Any, default: Any) -> None:
    assert _plain_parameters_schema(_arguments(annotation, default, None)) is None


def test_a_plain_tool_validates_like_the_pydantic_model_on_first_call() -> None:
    def f(count: int, tags: list[str] | None = None, mode: Literal["a", "b"] = "a") -> None: ...

    fs = function_args_schema(f)
    assert fs._model == []  # nothing built yet
    assert fs.bind({"count": "3", "tags": ["x"]}) == ((), {"count": 3, "tags": ["x"], "mode": "a"})
    assert len(fs._model) == 1
    with pytest.raises(Exception, match="mode"):
        fs.bind({"count": 1, "mode": "c"})


def test_an_empty_signature_matches_pydantic() -> None:
    fast = _plain_parameters_schema([])
    assert fast is not None
    assert json.dumps(fast) == json.dumps(_model_parameters("f", _build_model("f", [], False)))
