"""Argument reading for the built-in tools, which take raw JSON arguments (no pydantic).

The built-in tools are plain ``Tool`` values with hand-written schemas, so importing them
stays cheap. Numbers out of range are clamped rather than refused (a model asking for 50
results gets the maximum); a wrong type is an ``InvalidToolArguments`` the model can fix.
"""

from __future__ import annotations

import math
from typing import Any

from ..exceptions import InvalidToolArguments


def text_arg(args: dict[str, Any], name: str, default: str | None = None) -> str:
    """A string argument; required when ``default`` is ``None``."""
    value = args.get(name, default)
    if value is None:
        raise InvalidToolArguments(f"{name} is required", hint=f"pass {name} as a string")
    if not isinstance(value, str):
        raise InvalidToolArguments(f"{name} must be a string, got {type(value).__name__}")
    return value


def optional_text_arg(args: dict[str, Any], name: str) -> str | None:
    """A string argument that may be missing or null."""
    if args.get(name) is None:
        return None
    return text_arg(args, name)


def number_arg(args: dict[str, Any], name: str, default: float, low: float, high: float) -> float:
    """A number argument clamped to ``[low, high]``."""
    value = args.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise InvalidToolArguments(f"{name} must be a number, got {value!r}")
    return float(min(max(value, low), high))


def int_arg(args: dict[str, Any], name: str, default: int, low: int, high: int) -> int:
    """An integer argument clamped to ``[low, high]`` (a whole float such as 5.0 counts)."""
    value = number_arg(args, name, default, low, high)
    if value != int(value):
        raise InvalidToolArguments(f"{name} must be a whole number, got {args[name]!r}")
    return int(value)


def bool_arg(args: dict[str, Any], name: str, default: bool = False) -> bool:
    """A boolean argument."""
    value = args.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise InvalidToolArguments(f"{name} must be true or false, got {value!r}")
    return value


def object_schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """The JSON Schema of a closed arguments object."""
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
