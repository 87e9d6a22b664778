"""``OpenTelemetryTracer``: export lovia spans as OpenTelemetry GenAI spans.

Optional: needs the ``otel`` extra of lovia-core (``pip install opentelemetry-api``);
``opentelemetry`` is imported when a tracer is built, never by ``import lovia``.

Mapping onto the GenAI semantic conventions (status: Development upstream):

=============  =========================  ==================================  ========
lovia span     OTel span name             ``gen_ai.operation.name``           kind
=============  =========================  ==================================  ========
``run``        ``invoke_agent {agent}``   ``invoke_agent``                    INTERNAL
``model_call`` ``chat {model}``           ``chat``                            CLIENT
``tool_call``  ``execute_tool {name}``    ``execute_tool``                    INTERNAL
``handoff``    ``handoff {to_agent}``     (none: no GenAI operation exists)   INTERNAL
=============  =========================  ==================================  ========

Attributes lovia knows are renamed (``agent`` -> ``gen_ai.agent.name``, ``model`` ->
``gen_ai.request.model``, ``name`` -> ``gen_ai.tool.name``, ``call_id`` ->
``gen_ai.tool.call.id``, ``input_tokens``/``output_tokens`` -> ``gen_ai.usage.*``,
``session_id`` -> ``gen_ai.conversation.id``); any other key is kept under ``lovia.<key>``.
``None`` values are dropped (OpenTelemetry rejects them). A span that ends with an
exception gets status ERROR, an ``error.type`` attribute and the recorded exception.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any

from .exceptions import UserError
from .tracing import AttributeValue, Span, SpanName

if TYPE_CHECKING:
    from opentelemetry.trace import Span as OtelSpan
    from opentelemetry.trace import SpanKind, TracerProvider

__all__ = ["OpenTelemetryTracer"]

_ATTRIBUTE_NAMES = {
    "agent": "gen_ai.agent.name",
    "model": "gen_ai.request.model",
    "name": "gen_ai.tool.name",
    "call_id": "gen_ai.tool.call.id",
    "input_tokens": "gen_ai.usage.input_tokens",
    "output_tokens": "gen_ai.usage.output_tokens",
    "session_id": "gen_ai.conversation.id",
    "provider": "gen_ai.provider.name",
}

_OPERATIONS: dict[SpanName, tuple[str | None, str]] = {
    # span name -> (gen_ai.operation.name, the attribute that completes the span name)
    "run": ("invoke_agent", "agent"),
    "model_call": ("chat", "model"),
    "tool_call": ("execute_tool", "name"),
    "handoff": (None, "to_agent"),
}


def _otel_key(key: str) -> str:
    return _ATTRIBUTE_NAMES.get(key) or f"lovia.{key}"


class _OtelSpanAdapter:
    """lovia's ``Span`` view of one OpenTelemetry span."""

    __slots__ = ("_span",)

    def __init__(self, span: OtelSpan) -> None:
        self._span = span

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        if value is not None:
            self._span.set_attribute(_otel_key(key), value)

    def record_exception(self, exc: BaseException) -> None:
        self._span.record_exception(exc)


class OpenTelemetryTracer:
    """A ``Tracer`` that emits OpenTelemetry spans following the GenAI conventions.

    ``tracer_provider=None`` uses the globally configured OpenTelemetry provider. Raises
    ``UserError`` (hint: ``pip install opentelemetry-api``) when ``opentelemetry`` is not
    installed.
    """

    __slots__ = ("_error_code", "_kinds", "_status", "_tracer")

    def __init__(self, tracer_provider: TracerProvider | None = None) -> None:
        try:
            from opentelemetry import trace
        except ImportError as exc:
            raise UserError(
                "OpenTelemetryTracer needs the opentelemetry-api package",
                hint="pip install opentelemetry-api",
            ) from exc
        self._tracer = trace.get_tracer("lovia", tracer_provider=tracer_provider)
        self._status = trace.Status
        self._error_code = trace.StatusCode.ERROR
        self._kinds: dict[SpanName, SpanKind] = {
            "run": trace.SpanKind.INTERNAL,
            "model_call": trace.SpanKind.CLIENT,
            "tool_call": trace.SpanKind.INTERNAL,
            "handoff": trace.SpanKind.INTERNAL,
        }

    def span(self, name: SpanName, /, **attrs: AttributeValue) -> AbstractContextManager[Span]:
        """Open an OpenTelemetry span (the current span becomes its parent)."""
        return self._open(name, attrs)

    @contextmanager
    def _open(self, name: SpanName, attrs: dict[str, AttributeValue]) -> Iterator[Span]:
        operation, subject_key = _OPERATIONS[name]
        subject = attrs.get(subject_key)
        prefix = operation or name
        span_name = f"{prefix} {subject}" if subject is not None else prefix
        attributes: dict[str, Any] = {
            _otel_key(key): value for key, value in attrs.items() if value is not None
        }
        if operation is not None:
            attributes["gen_ai.operation.name"] = operation
        with self._tracer.start_as_current_span(
            span_name,
            kind=self._kinds[name],
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ) as otel_span:
            try:
                yield _OtelSpanAdapter(otel_span)
            except GeneratorExit:
                raise  # an async generator holding the span was closed: not an error
            except BaseException as exc:
                otel_span.record_exception(exc)
                otel_span.set_attribute("error.type", type(exc).__qualname__)
                otel_span.set_status(self._status(self._error_code, f"{type(exc).__name__}: {exc}"))
                raise
