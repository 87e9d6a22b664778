"""Strict validation of request bodies against the official SDKs' request TypedDicts.

pydantic validates the types but silently ignores unknown TypedDict keys (and validates
``Iterable`` fields lazily), so ``unknown_keys`` walks the body against the TypedDicts and
reports every key no matching type declares.
"""

from __future__ import annotations

import collections.abc
import types
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from pydantic import TypeAdapter
from typing_extensions import NotRequired, Required, is_typeddict

_WRAPPERS: set[Any] = {Required, NotRequired}
try:
    from typing_extensions import ReadOnly

    _WRAPPERS.add(ReadOnly)
except ImportError:  # pragma: no cover - older typing_extensions
    pass
_SEQUENCES = {list, tuple, collections.abc.Iterable, collections.abc.Sequence}


def _unwrap(tp: Any) -> Any:
    while True:
        origin = get_origin(tp)
        if origin in _WRAPPERS or (
            origin is not None and str(origin) == "typing.Annotated" or hasattr(tp, "__metadata__")
        ):
            tp = get_args(tp)[0]
        else:
            return tp


def _hints(tp: Any) -> dict[str, Any]:
    return get_type_hints(tp, include_extras=True)


def _matches(value: Any, tp: Any) -> bool:
    tp = _unwrap(tp)
    origin = get_origin(tp)
    if is_typeddict(tp):
        if not isinstance(value, dict):
            return False
        for key, hint in _hints(tp).items():
            inner = _unwrap(hint)
            if get_origin(inner) is Literal and key in value and value[key] not in get_args(inner):
                return False
        return set(tp.__required_keys__) <= set(value)
    if origin in (Union, types.UnionType):
        return any(_matches(value, a) for a in get_args(tp))
    if origin in _SEQUENCES:
        return isinstance(value, list)
    if origin is Literal:
        return value in get_args(tp)
    if tp is str:
        return isinstance(value, str)
    return True


def unknown_keys(value: Any, tp: Any, path: str = "$") -> list[str]:
    """Paths of keys in ``value`` that the TypedDict ``tp`` (recursively) does not declare."""
    tp = _unwrap(tp)
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        candidates = [unknown_keys(value, a, path) for a in get_args(tp) if _matches(value, a)]
        return min(candidates, key=len) if candidates else []
    if is_typeddict(tp) and isinstance(value, dict):
        hints = _hints(tp)
        out = [f"{path}.{k}" for k in value if k not in hints]
        for key, item in value.items():
            if key in hints:
                out += unknown_keys(item, hints[key], f"{path}.{key}")
        return out
    if origin in _SEQUENCES and isinstance(value, list):
        args = get_args(tp)
        if args:
            return [
                e
                for i, item in enumerate(value)
                for e in unknown_keys(item, args[0], f"{path}[{i}]")
            ]
    return []


def assert_valid(tp: Any, body: dict[str, Any]) -> None:
    """``body`` validates against ``tp`` and has no unknown keys."""
    TypeAdapter(tp).validate_python(body)
    extra = unknown_keys(body, tp)
    assert extra == [], extra
