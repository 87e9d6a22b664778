"""Tracing: the ``Tracer`` seam and three small implementations.

A run opens spans from a closed set of names (``SpanName``): ``run`` (agent, run_id; then
turns, total_tokens, resumed), ``model_call`` (model, turn), ``tool_call`` (name, call_id)
and ``handoff`` (from_agent, to_agent). An exception raised inside ``with tracer.span(...)``
is recorded on the span and re-raised; tracing never swallows or changes an error.

The tracer is passed explicitly (``Runner.run(tracer=...)``) and inherited by agent-as-tool
sub-runs; there is no global tracer. The one piece of ambient state is the name of the
current span, kept in a ``contextvars.ContextVar`` so ``InMemoryTracer`` can record each
span's parent across tasks (a task started inside a span sees that span as its parent).

``NoopTracer`` is the default and costs one method call per span: it hands out a single
shared span object.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from types import TracebackType
from typing import IO, Literal, Protocol, Union

__all__ = [
    "AttributeValue",
    "ConsoleTracer",
    "InMemoryTracer",
    "NoopTracer",
    "RecordedSpan",
    "Span",
    "SpanName",
    "Tracer",
]

SpanName = Literal["run", "model_call", "tool_call", "handoff"]
"""Every span name a run emits."""

AttributeValue = Union[str, bool, int, float, None]
"""A span attribute value; ``None`` means "not known" and exporters may drop it."""

_current_span: ContextVar[SpanName | None] = ContextVar("lovia_current_span", default=None)


class Span(Protocol):
    """An open span: annotate it while the traced work runs."""

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        """Set (or overwrite) one attribute."""
        ...

    def record_exception(self, exc: BaseException) -> None:
        """Record an error on the span without raising it."""
        ...


class Tracer(Protocol):
    """The tracing seam: ``with tracer.span("tool_call", name=..., call_id=...) as span``.

    The span name is positional-only, so ``name=`` stays free for an attribute (the
    ``tool_call`` span's tool name).
    """

    def span(self, name: SpanName, /, **attrs: AttributeValue) -> AbstractContextManager[Span]:
        """Open a span for the duration of the ``with`` block."""
        ...


class _NoopSpan:
    __slots__ = ()

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        pass

    def record_exception(self, exc: BaseException) -> None:
        pass

    def __enter__(self) -> _NoopSpan:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None


_NOOP_SPAN = _NoopSpan()


class NoopTracer:
    """A tracer that records nothing (the default)."""

    __slots__ = ()

    def span(self, name: SpanName, /, **attrs: AttributeValue) -> AbstractContextManager[Span]:
        """Return the shared do-nothing span."""
        return _NOOP_SPAN


@dataclass(frozen=True, slots=True)
class RecordedSpan:
    """A finished span as ``InMemoryTracer`` saw it."""

    name: SpanName
    """Which span this was (``run``, ``model_call``, ``tool_call``, ``handoff``)."""
    attributes: dict[str, AttributeValue] = field(default_factory=dict)
    """The attributes given when opening plus those set while open."""
    start: float = 0.0
    """Clock reading when the span opened (seconds)."""
    end: float = 0.0
    """Clock reading when the span closed (seconds)."""
    error: BaseException | None = None
    """The exception raised in (or recorded on) the span; the last one wins."""
    parent: SpanName | None = None
    """The name of the enclosing span, ``None`` at the top."""

    @property
    def duration_ms(self) -> float:
        """``end - start`` in milliseconds."""
        return (self.end - self.start) * 1000.0


class _LiveSpan:
    """A span being recorded; turned into a ``RecordedSpan`` when it closes."""

    __slots__ = ("attributes", "error")

    def __init__(self, attributes: dict[str, AttributeValue]) -> None:
        self.attributes = attributes
        self.error: BaseException | None = None

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        self.attributes[key] = value

    def record_exception(self, exc: BaseException) -> None:
        self.error = exc


@contextmanager
def _recording(
    name: SpanName,
    attrs: dict[str, AttributeValue],
    clock: Callable[[], float],
    finish: Callable[[RecordedSpan], None],
) -> Iterator[_LiveSpan]:
    parent = _current_span.get()
    reset_token = _current_span.set(name)
    live = _LiveSpan(attrs)
    start = clock()
    try:
        yield live
    except GeneratorExit:
        raise  # an async generator holding the span was closed: not an error
    except BaseException as exc:
        live.error = exc
        raise
    finally:
        _restore(reset_token, parent)
        finish(
            RecordedSpan(
                name=name,
                attributes=live.attributes,
                start=start,
                end=clock(),
                error=live.error,
                parent=parent,
            )
        )


def _restore(reset_token: Token[SpanName | None], parent: SpanName | None) -> None:
    try:
        _current_span.reset(reset_token)
    except ValueError:
        # Closed in another context than it was opened in (an async generator finalised
        # by a different task): fall back to restoring the value.
        _current_span.set(parent)


class InMemoryTracer:
    """A tracer that keeps every finished span in ``spans`` (for tests and debugging).

    Spans are appended when they close, so children precede their parent. ``clock`` is
    ``time.perf_counter`` by default.
    """

    __slots__ = ("_clock", "spans")

    def __init__(self, *, clock: Callable[[], float] = time.perf_counter) -> None:
        self.spans: list[RecordedSpan] = []
        self._clock = clock

    def span(self, name: SpanName, /, **attrs: AttributeValue) -> AbstractContextManager[Span]:
        """Open a recorded span."""
        return _recording(name, attrs, self._clock, self.spans.append)

    def names(self) -> list[SpanName]:
        """The recorded span names, in finishing order."""
        return [span.name for span in self.spans]


class ConsoleTracer:
    """A tracer that writes one line per finished span to ``stream`` (stderr by default).

    Spans shorter than ``min_duration_ms`` are not printed (0.0 prints everything).
    """

    __slots__ = ("_clock", "min_duration_ms", "stream")

    def __init__(
        self,
        min_duration_ms: float = 0.0,
        stream: IO[str] | None = None,
        *,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.min_duration_ms = min_duration_ms
        """Spans shorter than this many milliseconds are not printed."""
        self.stream = stream
        """Where lines go; ``None`` means ``sys.stderr`` at the time of writing."""
        self._clock = clock

    def span(self, name: SpanName, /, **attrs: AttributeValue) -> AbstractContextManager[Span]:
        """Open a span that prints itself when it closes."""
        return _recording(name, attrs, self._clock, self._write)

    def _write(self, span: RecordedSpan) -> None:
        if span.duration_ms < self.min_duration_ms:
            return
        fields = " ".join(f"{key}={value!r}" for key, value in span.attributes.items())
        line = f"[lovia] {span.name} {span.duration_ms:.1f}ms"
        if fields:
            line += f" {fields}"
        if span.error is not None:
            line += f" error={type(span.error).__name__}: {span.error}"
        stream = self.stream if self.stream is not None else sys.stderr
        stream.write(line + "\n")
