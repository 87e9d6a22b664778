"""JSON Schema from Python types, and validation against them (pydantic lives here).

Two uses share this module: a tool's arguments object, built from a function signature
(``function_args_schema``), and a structured-output type (``model_json_schema``,
``coerce_output``). pydantic is imported only where it is needed: a tool whose parameters
are plain JSON types (``int``, ``str``, ``float``, ``bool``, ``None``, ``Any``, ``list[...]``,
``dict[str, ...]``, unions, ``Literal``, ``Annotated[T, "text"]``, JSON scalar defaults) gets
its schema from a small builder here that writes exactly what pydantic would (a test compares
the two), and its validator is built on the first call. Anything richer (models, dataclasses,
TypedDicts, enums, ``Field`` constraints) goes through pydantic at decoration time, as before.
What a call validates is the same either way: it is always pydantic's model.

Rules for argument schemas:

- type hints give the types; a default makes the argument optional;
- ``Annotated[T, "text"]`` becomes the property description, ``Annotated[T, Field(...)]``
  carries pydantic constraints, and both survive inside ``Optional[...]``;
- docstring parameter descriptions (Google, numpy or Sphinx style) fill the gaps, and the
  docstring's prose before its sections becomes the tool description;
- one parameter annotated ``RunContext`` (any name) is injected, not part of the schema;
- pydantic's generated ``title`` keys are stripped (a user property named ``title`` stays);
- ``strict=True`` closes every object (``additionalProperties: false``) and requires every
  property, as OpenAI's strict function calling demands.
"""

from __future__ import annotations

import functools
import inspect
import math
import re
import sys
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union

from .exceptions import InvalidToolArguments, UserError
from .run_context import RunContext

if TYPE_CHECKING:
    from pydantic import BaseModel, TypeAdapter, ValidationError

__all__ = [
    "FunctionSchema",
    "ParsedDocstring",
    "coerce_output",
    "function_args_schema",
    "model_json_schema",
    "parse_docstring",
    "strict_json_schema",
    "validate_args",
]

_MAX_REPORTED_ERRORS = 5


@dataclass(frozen=True, slots=True)
class _Argument:
    """One schema parameter: what the pydantic field is built from."""

    name: str
    field: str
    annotation: Any
    default: Any
    """``...`` when the argument is required."""
    description: str | None


@dataclass(frozen=True, slots=True)
class FunctionSchema:
    """A function's arguments as a JSON Schema plus the validator built from it.

    Built by ``function_args_schema``; ``bind`` validates one call's raw arguments. The
    pydantic model behind the validator may be built on the first ``bind`` (see the module
    docstring); it is the same model either way.
    """

    name: str
    """The function's name."""
    description: str
    """The docstring's prose before its sections (``""`` without a docstring)."""
    parameters: dict[str, Any]
    """The JSON Schema of the arguments object."""
    context_param: str | None
    """The parameter that receives the ``RunContext``, if any."""
    _fields: tuple[tuple[str, str, bool], ...]
    """(parameter name, internal field name, positional-only) in signature order; the
    RunContext parameter has an empty field name."""
    _arguments: tuple[_Argument, ...]
    _strict: bool
    _model: list[type[BaseModel]]
    """Empty until the model is built (a list: the dataclass is frozen)."""
    _positional: bool = True
    """Whether any parameter is positional-only (``bind`` then passes it positionally)."""

    @property
    def model(self) -> type[BaseModel]:
        """The pydantic model that validates a call's arguments."""
        if not self._model:
            self._model.append(_build_model(self.name, self._arguments, self._strict))
        return self._model[0]

    def bind(
        self, args: Mapping[str, Any], ctx: RunContext[Any] | None = None
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Validate raw ``args`` and return the ``(*args, **kwargs)`` to call the function with.

        Raises ``InvalidToolArguments`` (a compact message) when validation fails.
        """
        if self._arguments or args != {}:
            values = validate_args(self, args)
        else:
            # No parameters and ``{}`` (a no-argument tool's every call): the model accepts
            # it and yields no values, so it is not run. (Only ``{}``: ``None`` or ``[]``,
            # also falsy, are not an object and are refused by the model as before.)
            values = {}
        if self.context_param is not None:
            values[self.context_param] = ctx
        if not self._positional:
            return (), values  # (the usual signature: no positional-only parameter)
        positional = tuple(values.pop(name) for name, _, pos_only in self._fields if pos_only)
        return positional, values


def validate_args(schema: FunctionSchema, args: Mapping[str, Any]) -> dict[str, Any]:
    """Validate and coerce raw JSON ``args``: returns the values by parameter name.

    Defaults fill omitted optional arguments. Raises ``InvalidToolArguments`` listing the
    first few problems as ``name: message``.
    """
    model = schema.model
    try:
        validated = model.model_validate(args)
    except Exception as exc:
        # Imported on the failure path only: a `from` import costs a Python-level call
        # into importlib on every tool call, and this runs once per call.
        from pydantic import ValidationError

        if not isinstance(exc, ValidationError):
            raise
        raise InvalidToolArguments(
            f"invalid arguments for {schema.name!r}: {_compact_errors(exc)}",
            hint="call the tool again with arguments that match its JSON Schema",
        ) from None
    return {name: getattr(validated, field) for name, field, _ in schema._fields if field}


def _compact_errors(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False)
    parts = []
    for err in errors[:_MAX_REPORTED_ERRORS]:
        loc = ".".join(str(p) for p in err["loc"]) or "(arguments)"
        parts.append(f"{loc}: {err['msg']}")
    if len(errors) > _MAX_REPORTED_ERRORS:
        parts.append(f"and {len(errors) - _MAX_REPORTED_ERRORS} more")
    return "; ".join(parts)


def function_args_schema(
    fn: Callable[..., Any], *, name: str | None = None, strict: bool = False
) -> FunctionSchema:
    """Build the arguments schema and validator for ``fn`` (see the module docstring).

    Raises ``UserError`` for ``*args``/``**kwargs``, more than one ``RunContext`` parameter,
    or type hints that cannot be resolved.
    """
    base = _unwrap_partial(fn)  # a partial's name, docstring and hints are its function's
    fn_name: str = name or getattr(base, "__name__", None) or type(base).__name__
    hints = _resolve_hints(base, fn_name)
    doc = parse_docstring(inspect.getdoc(base) or "")
    context_param: str | None = None
    arguments: list[_Argument] = []
    fields: list[tuple[str, str, bool]] = []
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise UserError(
                f"tool {fn_name!r} takes *{param.name}; tool parameters must be named",
                hint="declare each argument explicitly",
            )
        annotation = hints.get(param.name, Any)
        if _is_run_context(annotation):
            if context_param is not None:
                raise UserError(
                    f"tool {fn_name!r} has two RunContext parameters "
                    f"({context_param!r} and {param.name!r})",
                    hint="annotate exactly one parameter as RunContext",
                )
            context_param = param.name
            fields.append((param.name, "", param.kind is param.POSITIONAL_ONLY))
            continue
        field = f"p{len(fields)}"
        description = _annotated_description(annotation) or doc.params.get(param.name)
        default = ... if param.default is param.empty else param.default
        arguments.append(_Argument(param.name, field, annotation, default, description))
        fields.append((param.name, field, param.kind is param.POSITIONAL_ONLY))
    model: list[type[BaseModel]] = []
    parameters = _plain_parameters_schema(arguments, strict=strict)
    if parameters is None:
        model.append(_build_model(fn_name, arguments, strict))
        parameters = _model_parameters(fn_name, model[0])
    if strict:
        closed = strict_json_schema(parameters)
        if closed is None:
            raise UserError(
                f"tool {fn_name!r} cannot be strict: an argument is an open-ended object",
                hint="type it as a pydantic model, dataclass or TypedDict, or use strict=False",
            )
        parameters = closed
    return FunctionSchema(
        name=fn_name,
        description=doc.description,
        parameters=parameters,
        context_param=context_param,
        _fields=tuple(fields),
        _arguments=tuple(arguments),
        _strict=strict,
        _model=model,
        _positional=any(pos_only for _, _, pos_only in fields),
    )


def _build_model(
    fn_name: str, arguments: typing.Sequence[_Argument], strict: bool
) -> type[BaseModel]:
    from pydantic import ConfigDict, Field, PydanticUserError, create_model

    definitions: dict[str, Any] = {
        a.field: (a.annotation, Field(a.default, alias=a.name, description=a.description))
        for a in arguments
    }
    config = ConfigDict(extra="forbid" if strict else "ignore")
    try:
        return create_model(f"{fn_name}_args", __config__=config, **definitions)
    except PydanticUserError as exc:
        raise _unusable_arguments(fn_name, exc) from exc


def _model_parameters(fn_name: str, model: type[BaseModel]) -> dict[str, Any]:
    from pydantic import PydanticUserError

    try:
        parameters = _clean(model.model_json_schema())
    except PydanticUserError as exc:
        raise _unusable_arguments(fn_name, exc) from exc
    for prop in parameters.get("properties", {}).values():
        _lift_description(prop)
    return parameters


def _unusable_arguments(fn_name: str, exc: Exception) -> UserError:
    return UserError(
        f"cannot build a JSON Schema for the arguments of tool {fn_name!r}: {exc}",
        hint="use JSON-friendly types: builtins, pydantic models, dataclasses, "
        "typing_extensions.TypedDict, Literal, unions",
    )


# --- the plain-JSON fast path (no pydantic) ----------------------------------------------

_PLAIN_TYPES: dict[Any, dict[str, Any]] = {
    int: {"type": "integer"},
    str: {"type": "string"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
    None: {"type": "null"},
}


class _NotPlain(Exception):
    """The annotation needs pydantic to describe it."""


def _plain_parameters_schema(
    arguments: typing.Sequence[_Argument], *, strict: bool = False
) -> dict[str, Any] | None:
    """The arguments object's schema, written as pydantic would, or ``None`` for richer types.

    Keys are sorted as pydantic sorts them (every mapping but ``properties``, whose order is
    the signature's), so the schema is byte-identical to the pydantic path's.
    """
    properties: dict[str, Any] = {}
    required: list[str] = []
    try:
        for arg in arguments:
            prop = dict(_plain(arg.annotation))
            if arg.default is ...:
                required.append(arg.name)
            else:
                prop["default"] = _plain_default(arg.default)
            if arg.description is not None:
                prop["description"] = arg.description
            properties[arg.name] = _sorted(prop)
    except _NotPlain:
        return None
    schema: dict[str, Any] = {"properties": properties}
    if strict:
        schema["additionalProperties"] = False
    if required:
        schema["required"] = required
    schema["type"] = "object"
    return dict(sorted(schema.items()))


def _plain(annotation: Any) -> dict[str, Any]:
    if annotation is Any:
        return {}
    found = _PLAIN_TYPES.get(annotation) if _hashable(annotation) else None
    if found is not None:
        return found
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation is list or (origin is list and len(args) == 1):
        return {"items": _plain(args[0]) if args else {}, "type": "array"}
    if annotation is dict:
        return {"additionalProperties": True, "type": "object"}
    if origin is dict and len(args) == 2 and args[0] is str and args[1] is not Any:
        return {"additionalProperties": _plain(args[1]), "type": "object"}
    if origin is Union or origin is types.UnionType:
        return _plain_union(args)
    if origin is Literal:
        return _plain_literal(args)
    if origin is Annotated and all(isinstance(m, str) for m in args[1:]):
        inner = typing.get_origin(args[0])
        if inner is Union or inner is types.UnionType or inner is Annotated:
            raise _NotPlain  # descriptions inside unions: pydantic places them per branch
        return _plain(args[0])
    raise _NotPlain


def _plain_union(args: tuple[Any, ...]) -> dict[str, Any]:
    if Any in args or any(typing.get_origin(a) in (Annotated, Literal) for a in args):
        raise _NotPlain
    branches = [_plain(a) for a in args]
    if len({repr(b) for b in branches}) != len(branches):
        raise _NotPlain  # pydantic merges duplicate branches; leave that to it
    return {"anyOf": branches}


def _plain_literal(values: tuple[Any, ...]) -> dict[str, Any]:
    if len(values) < 2 or len(set(map(repr, values))) != len(values):
        raise _NotPlain  # one value is a `const`; duplicates are merged
    kinds = {type(v) for v in values}
    if kinds == {str}:
        return {"enum": list(values), "type": "string"}
    if kinds == {int}:
        return {"enum": list(values), "type": "integer"}
    raise _NotPlain


def _plain_default(value: Any) -> Any:
    if value is None or type(value) in (bool, int, str):
        return value
    if type(value) is float and math.isfinite(value):
        return value
    raise _NotPlain


def _sorted(prop: dict[str, Any]) -> dict[str, Any]:
    return dict(sorted(prop.items()))


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _unwrap_partial(fn: Callable[..., Any]) -> Callable[..., Any]:
    while isinstance(fn, functools.partial):
        fn = fn.func
    return fn


def _resolve_hints(fn: Callable[..., Any], fn_name: str) -> dict[str, Any]:
    target = fn if inspect.isfunction(fn) or inspect.ismethod(fn) else type(fn).__call__
    try:
        return typing.get_type_hints(target, include_extras=True)
    except (NameError, TypeError) as exc:
        raise UserError(
            f"cannot resolve the type hints of tool {fn_name!r}: {exc}",
            hint="define the types a tool uses at module level, not inside a function",
        ) from exc


def _is_run_context(annotation: Any) -> bool:
    if typing.get_origin(annotation) is Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation is RunContext or typing.get_origin(annotation) is RunContext


def _annotated_description(annotation: Any) -> str | None:
    """The description in ``Annotated`` metadata, looking inside ``Optional``/unions too."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        # A FieldInfo can only exist once pydantic is loaded: don't load it to look for one.
        fields_module = sys.modules.get("pydantic.fields")
        field_info = getattr(fields_module, "FieldInfo", None)
        for meta in reversed(typing.get_args(annotation)[1:]):
            if isinstance(meta, str):
                return meta
            if field_info is not None and isinstance(meta, field_info) and meta.description:
                return str(meta.description)
    elif origin is Union or origin is types.UnionType:
        for arg in typing.get_args(annotation):
            found = _annotated_description(arg)
            if found:
                return found
    return None


def _lift_description(prop: dict[str, Any]) -> None:
    # Optional[Annotated[T, Field(description=...)]] puts the description on the branch;
    # keep it once, on the property, where models read it.
    desc = prop.get("description")
    if desc is None:
        return
    for branch in prop.get("anyOf", ()):
        if isinstance(branch, dict) and branch.get("description") == desc:
            del branch["description"]


def model_json_schema(tp: Any) -> dict[str, Any]:
    """The JSON Schema of a type (pydantic model, dataclass, TypedDict, Literal, union, ...).

    pydantic's generated titles are stripped. Raises ``UserError`` for a type that has no
    JSON Schema (a callable, an arbitrary class).
    """
    from pydantic import PydanticUserError

    adapter = _adapter(tp)
    try:
        return _clean(adapter.json_schema())
    except PydanticUserError as exc:
        raise _unusable_type(tp, exc) from exc


def coerce_output(tp: Any, value: Any) -> Any:
    """Validate (and coerce, in pydantic's lax mode) a decoded JSON ``value`` into ``tp``.

    Raises ``pydantic.ValidationError`` when it does not fit.
    """
    return _adapter(tp).validate_python(value)


def _adapter(tp: Any) -> TypeAdapter[Any]:
    from pydantic import PydanticUserError, TypeAdapter

    try:
        try:
            return _cached_adapter(tp)
        except TypeError:  # unhashable type expression (Annotated with unhashable metadata)
            return TypeAdapter(tp)
    except PydanticUserError as exc:
        raise _unusable_type(tp, exc) from exc


def _unusable_type(tp: Any, exc: Exception) -> UserError:
    return UserError(
        f"{tp!r} cannot be used as a schema type: {exc}",
        hint="use JSON-friendly types: builtins, pydantic models, dataclasses, "
        "typing_extensions.TypedDict, Literal, unions",
    )


@functools.lru_cache(maxsize=256)
def _cached_adapter(tp: Any) -> TypeAdapter[Any]:
    from pydantic import TypeAdapter

    return TypeAdapter(tp)


# Keywords whose value maps names to subschemas (names are data, never keywords).
_NAMED_SUBSCHEMAS = frozenset({"properties", "$defs", "definitions", "patternProperties"})
# Keywords whose value is one subschema or a list of them.
_SUBSCHEMAS = frozenset(
    {"items", "prefixItems", "anyOf", "oneOf", "allOf", "not", "additionalProperties"}
)


def _clean(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``schema`` without pydantic's ``title`` keywords."""
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in _NAMED_SUBSCHEMAS and isinstance(value, dict):
            out[key] = {k: _clean(v) if isinstance(v, dict) else v for k, v in value.items()}
        elif key in _SUBSCHEMAS:
            out[key] = _map_subschemas(value, _clean)
        else:
            out[key] = value
    return out


class _OpenObject(Exception):
    """An object schema that cannot be closed (a free-form or open-ended dict)."""


def strict_json_schema(schema: dict[str, Any]) -> dict[str, Any] | None:
    """``schema`` in OpenAI's strict form, or ``None`` when it has an open-ended object.

    Strict form: every object has ``additionalProperties: false`` and requires all of its
    properties, and ``default`` keywords are dropped (meaningless once all are required).
    """
    try:
        return _strictify(schema)
    except _OpenObject:
        return None


def _strictify(schema: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "default":
            continue
        if key in _NAMED_SUBSCHEMAS and isinstance(value, dict):
            out[key] = {k: _strictify(v) if isinstance(v, dict) else v for k, v in value.items()}
        elif key in _SUBSCHEMAS:
            out[key] = _map_subschemas(value, _strictify)
        else:
            out[key] = value
    if out.get("type") == "object":
        if out.get("additionalProperties", False) is not False or "properties" not in out:
            raise _OpenObject
        out["additionalProperties"] = False
        out["required"] = list(out["properties"])
    return out


def _map_subschemas(value: Any, fn: Callable[[dict[str, Any]], dict[str, Any]]) -> Any:
    if isinstance(value, dict):
        return fn(value)
    if isinstance(value, list):
        return [fn(v) if isinstance(v, dict) else v for v in value]
    return value


# --- docstrings -----------------------------------------------------------------------

_GOOGLE_PARAM_HEADERS = frozenset(
    {"args", "arguments", "parameters", "params", "keyword args", "keyword arguments"}
)
_GOOGLE_SECTIONS = _GOOGLE_PARAM_HEADERS | {
    "other parameters",
    "returns",
    "return",
    "yields",
    "yield",
    "raises",
    "raise",
    "examples",
    "example",
    "notes",
    "note",
    "attributes",
    "see also",
    "warnings",
    "warning",
    "references",
}
_GOOGLE_HEADER = re.compile(r"^\s*([A-Za-z][A-Za-z ]*):\s*$")
_NUMPY_RULE = re.compile(r"^\s*-{3,}\s*$")
_SPHINX_FIELD = re.compile(r"^\s*:(\w+)")
_SPHINX_PARAM = re.compile(
    r"^\s*:(?:param|parameter|arg|argument|key|keyword)\s+(?:[^:]*\s)?(\w+)\s*:(.*)$"
)
_GOOGLE_ITEM = re.compile(r"^\s*\**(\w+)\s*(?:\([^)]*\))?\s*:(.*)$")
_NUMPY_ITEM = re.compile(r"^\s*(\w+)\s*(?::.*)?$")


@dataclass(frozen=True, slots=True)
class ParsedDocstring:
    """A docstring split into its prose and its parameter descriptions."""

    description: str
    """The prose before the first section (``Args:``, ``Parameters``, ``:param``)."""
    params: dict[str, str]
    """Parameter name -> its description, continuation lines joined by spaces."""


def parse_docstring(doc: str) -> ParsedDocstring:
    """Split a (cleaned) docstring into the prose before its sections and per-parameter text.

    Understands Google (``Args:``), numpy (``Parameters`` over a dashed rule) and Sphinx
    (``:param x:``) styles; unknown layouts give the whole text as the description.
    """
    lines = doc.expandtabs().splitlines()
    start = _first_section(lines)
    description = "\n".join(lines[:start]).strip()
    params: dict[str, str] = {}
    i = start
    while i < len(lines):
        line = lines[i]
        header = _google_header(line)
        if _SPHINX_PARAM.match(line):
            i = _read_sphinx_param(lines, i, params)
        elif i + 1 < len(lines) and _NUMPY_RULE.match(lines[i + 1]) and line.strip():
            is_params = line.strip().lower() in _GOOGLE_PARAM_HEADERS | {"other parameters"}
            i = _read_block(lines, i + 2, params if is_params else None, _NUMPY_ITEM, numpy=True)
        elif header:
            is_params = header.group(1).strip().lower() in _GOOGLE_PARAM_HEADERS
            i = _read_block(lines, i + 1, params if is_params else None, _GOOGLE_ITEM, numpy=False)
        else:
            i += 1
    return ParsedDocstring(description=description, params=params)


def _first_section(lines: list[str]) -> int:
    for i, line in enumerate(lines):
        if _SPHINX_FIELD.match(line) or _google_header(line):
            return i
        if i + 1 < len(lines) and line.strip() and _NUMPY_RULE.match(lines[i + 1]):
            return i
    return len(lines)


def _google_header(line: str) -> re.Match[str] | None:
    match = _GOOGLE_HEADER.match(line)
    return match if match and match.group(1).strip().lower() in _GOOGLE_SECTIONS else None


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _read_sphinx_param(lines: list[str], i: int, params: dict[str, str]) -> int:
    match = _SPHINX_PARAM.match(lines[i])
    assert match is not None
    text = [match.group(2).strip()]
    i += 1
    while i < len(lines) and lines[i].strip() and not _SPHINX_FIELD.match(lines[i]):
        text.append(lines[i].strip())
        i += 1
    params[match.group(1)] = " ".join(t for t in text if t)
    return i


def _read_block(
    lines: list[str],
    i: int,
    params: dict[str, str] | None,
    item: re.Pattern[str],
    *,
    numpy: bool,
) -> int:
    """Read one section's items; returns the index of the first line after the section."""
    base: int | None = None
    name: str | None = None
    text: list[str] = []

    def flush() -> None:
        if params is not None and name is not None:
            params[name] = " ".join(t for t in text if t)

    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        indent = _indent(line)
        if base is None:
            base = indent
        if indent < base or (
            indent == base and i + 1 < len(lines) and _NUMPY_RULE.match(lines[i + 1])
        ):
            break
        if not numpy and indent == base and _google_header(line):
            break
        match = item.match(line) if indent == base else None
        if match:
            flush()
            name, text = match.group(1), [] if numpy else [match.group(2).strip()]
        else:
            text.append(line.strip())
        i += 1
    flush()
    return i
