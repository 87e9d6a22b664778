"""Structured output: the final message's contract when ``output_type`` is not ``str``.

Providers that support it get the type's JSON Schema natively (``response_format_for``);
the others get an "Output format" block in the system prompt
(``format_output_instructions``). Structured output never adds a synthetic tool.

Both paths describe the same JSON shape. A JSON object type (pydantic model, dataclass,
TypedDict, ``dict``) is used as is. Any other type (``int``, ``list[...]``, ``Literal``,
unions) is wrapped as ``{"response": <value>}``, because native JSON Schema modes require an
object at the top; ``parse_structured_output`` unwraps it, and also accepts the bare value.

Parsing is lenient (``loads_lenient``: raw text, then code fences stripped, then the first
balanced JSON object or array in prose) and validation strict to the type. A failure raises
``OutputValidationError``; the run loop asks an ``OutputRepairStrategy`` whether to send a
corrective prompt.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .exceptions import OutputValidationError, UserError

__all__ = [
    "DefaultOutputRepair",
    "OutputRepairStrategy",
    "format_output_instructions",
    "is_text_output",
    "loads_lenient",
    "parse_structured_output",
    "resolve_output_repair",
    "response_format_for",
]

_WRAPPER_KEY = "response"
_RAW_SNIPPET_CHARS = 500
_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)```", re.DOTALL)
_MAX_PROSE_CANDIDATES = 64
"""How many ``{``/``[`` positions to try in prose before giving up (bounds the work)."""


def is_text_output(output_type: Any) -> bool:
    """Whether ``output_type`` means plain text (``str`` or ``None``): no contract at all."""
    return output_type is None or output_type is str


def _type_name(output_type: Any) -> str:
    name = getattr(output_type, "__name__", None)
    return name if isinstance(name, str) else repr(output_type)


def _schema_name(output_type: Any) -> str:
    name = re.sub(r"[^A-Za-z0-9_-]", "_", _type_name(output_type)).strip("_")
    return name[:64] or "output"


def _output_schema(output_type: Any) -> tuple[dict[str, Any], bool]:
    """The JSON Schema the model must follow, and whether it wraps a non-object type."""
    from .schema import model_json_schema

    schema = model_json_schema(output_type)
    if schema.get("type") == "object":
        return schema, False
    defs = schema.pop("$defs", None)
    wrapped: dict[str, Any] = {
        "type": "object",
        "properties": {_WRAPPER_KEY: schema},
        "required": [_WRAPPER_KEY],
    }
    if defs is not None:
        wrapped["$defs"] = defs
    return wrapped, True


def response_format_for(output_type: Any) -> dict[str, Any]:
    """The native structured-output request for ``output_type``, in OpenAI's shape.

    ``{"type": "json_schema", "json_schema": {"name", "schema", "strict"}}``; adapters for
    other vendors translate it. ``strict`` is ``True`` when the schema can be closed (every
    object gets ``additionalProperties: false`` and requires all its properties); free-form
    dicts keep a non-strict schema.
    """
    from .schema import strict_json_schema

    schema, _ = _output_schema(output_type)
    strict = strict_json_schema(schema)
    return {
        "type": "json_schema",
        "json_schema": {
            "name": _schema_name(output_type),
            "schema": strict if strict is not None else schema,
            "strict": strict is not None,
        },
    }


def format_output_instructions(output_type: Any) -> str:
    """The "Output format" block appended to the system prompt for non-native providers."""
    schema, wrapped = _output_schema(output_type)
    shape = (
        f'a JSON object whose "{_WRAPPER_KEY}" key holds the answer' if wrapped else "a JSON object"
    )
    return (
        "# Output format\n"
        f"Your final answer must be {shape}, and nothing else: no prose and no code fences. "
        "It must match this JSON Schema:\n"
        f"{json.dumps(schema, ensure_ascii=False)}"
    )


def loads_lenient(text: str) -> Any:
    """Decode JSON from model text: the raw text, then fenced code, then JSON inside prose.

    The prose step takes the first balanced JSON object or array. Raises ``ValueError``
    when none of the steps finds JSON.
    """
    stripped = text.strip()
    try:
        return json.loads(stripped)
    except (ValueError, RecursionError):  # RecursionError: hostile, absurdly deep nesting
        pass
    for match in _FENCE.finditer(stripped):
        try:
            return json.loads(match.group(1).strip())
        except (ValueError, RecursionError):
            continue
    decoder = json.JSONDecoder()
    tried = 0
    for match in re.finditer(r"[\[{]", stripped):
        if tried == _MAX_PROSE_CANDIDATES:
            break
        tried += 1
        try:
            value, _ = decoder.raw_decode(stripped, match.start())
        except (ValueError, RecursionError):
            continue
        return value
    raise ValueError("no JSON value found in the text")


def parse_structured_output(text: str, output_type: Any) -> Any:
    """Parse the final text into a validated ``output_type`` value.

    ``str`` (or ``None``) returns the text untouched. Raises ``OutputValidationError`` with a
    snippet of ``text`` as ``raw`` and the type's name.
    """
    if is_text_output(output_type):
        return text
    from pydantic import ValidationError

    from .schema import coerce_output

    _, wrapped = _output_schema(output_type)
    try:
        value = loads_lenient(text)
    except ValueError:
        if not wrapped or not text.strip():
            raise _output_error(text, output_type, "the reply contains no JSON") from None
        value = text.strip()  # e.g. a bare Literal word or number; lax validation may take it
    if wrapped and isinstance(value, dict) and set(value) == {_WRAPPER_KEY}:
        value = value[_WRAPPER_KEY]
    try:
        return coerce_output(output_type, value)
    except ValidationError as exc:
        detail = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(value)'}: {err['msg']}"
            for err in exc.errors(include_url=False)[:5]
        )
        raise _output_error(text, output_type, detail) from None


def _output_error(text: str, output_type: Any, detail: str) -> OutputValidationError:
    name = _type_name(output_type)
    snippet = text if len(text) <= _RAW_SNIPPET_CHARS else text[:_RAW_SNIPPET_CHARS] + "..."
    return OutputValidationError(
        f"the final output does not match {name}: {detail}",
        raw=snippet,
        output_type_name=name,
        hint="reply with only the JSON value the output format asks for",
    )


@runtime_checkable
class OutputRepairStrategy(Protocol):
    """Decides whether, and how, to ask the model to fix an invalid final output."""

    def build_prompt(self, exc: OutputValidationError, attempt: int) -> str | None:
        """The corrective user prompt for repair ``attempt`` (1-based), or ``None`` to stop."""
        ...


@dataclass(frozen=True, slots=True)
class DefaultOutputRepair:
    """Send up to ``max_attempts`` corrective prompts quoting the validation error."""

    max_attempts: int = 1
    """Repair turns per run; 0 raises ``OutputValidationError`` at the first failure."""

    def build_prompt(self, exc: OutputValidationError, attempt: int) -> str | None:
        """A prompt quoting ``exc`` while ``attempt <= max_attempts``, else ``None``."""
        if attempt > self.max_attempts:
            return None
        return (
            f"Your previous reply could not be used as the final answer: {exc.message}\n"
            "Reply again with only a JSON value that follows the output format, "
            "with no other text."
        )


def resolve_output_repair(
    value: bool | OutputRepairStrategy | None,
) -> OutputRepairStrategy | None:
    """``Agent.output_repair`` as a strategy: ``True`` -> ``DefaultOutputRepair()``,
    ``False``/``None`` -> ``None`` (raise at once), a strategy -> itself.

    Raises ``UserError`` for anything else.
    """
    if value is True:
        return DefaultOutputRepair()
    if value is False or value is None:
        return None
    if isinstance(value, OutputRepairStrategy):
        return value
    raise UserError(
        f"output_repair must be True, False or an OutputRepairStrategy, got {value!r}",
        hint="pass an object with a build_prompt(exc, attempt) method",
    )
