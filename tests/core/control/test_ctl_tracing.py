"""Tracers: the no-op default, the in-memory recorder (with parents) and the console printer."""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncGenerator

import pytest
from lovia.tracing import ConsoleTracer, InMemoryTracer, NoopTracer, RecordedSpan, Tracer


class Ticks:
    """A clock that advances one second per reading."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def test_noop_tracer_reuses_one_span_and_accepts_everything() -> None:
    tracer: Tracer = NoopTracer()
    with tracer.span("run", agent="a") as first, tracer.span("tool_call") as second:
        first.set_attribute("turns", 3)
        second.record_exception(ValueError("ignored"))
    assert first is second


def test_noop_tracer_does_not_swallow_errors() -> None:
    with pytest.raises(ValueError, match="boom"), NoopTracer().span("model_call"):
        raise ValueError("boom")


def test_in_memory_tracer_records_name_attributes_times_and_parents() -> None:
    tracer = InMemoryTracer(clock=Ticks())
    with tracer.span("run", agent="a", run_id="r1") as run:
        with tracer.span("model_call", model="m", turn=1):
            pass
        run.set_attribute("turns", 1)
    assert tracer.spans == [
        RecordedSpan("model_call", {"model": "m", "turn": 1}, 2.0, 3.0, None, "run"),
        RecordedSpan("run", {"agent": "a", "run_id": "r1", "turns": 1}, 1.0, 4.0, None, None),
    ]
    assert tracer.spans[1].duration_ms == 3000.0
    assert tracer.names() == ["model_call", "run"]


def test_an_exception_inside_a_span_is_recorded_and_reraised() -> None:
    tracer = InMemoryTracer()
    error = RuntimeError("tool broke")
    with pytest.raises(RuntimeError) as info, tracer.span("tool_call", name="t", call_id="c"):
        raise error
    assert info.value is error
    assert tracer.spans[0].error is error


def test_record_exception_marks_the_span_without_raising() -> None:
    tracer = InMemoryTracer()
    error = ValueError("bad args")
    with tracer.span("tool_call") as span:
        span.record_exception(error)
    assert tracer.spans[0].error is error


async def test_tasks_started_inside_a_span_see_it_as_their_parent() -> None:
    tracer = InMemoryTracer()

    async def tool(call_id: str) -> None:
        with tracer.span("tool_call", call_id=call_id):
            await asyncio.sleep(0)

    with tracer.span("run"):
        await asyncio.gather(tool("a"), tool("b"))
    with tracer.span("handoff"):
        pass
    assert [(s.name, s.parent) for s in tracer.spans] == [
        ("tool_call", "run"),
        ("tool_call", "run"),
        ("run", None),
        ("handoff", None),
    ]


async def test_a_span_in_an_async_generator_closed_early_is_not_an_error() -> None:
    tracer = InMemoryTracer()

    async def stream() -> AsyncGenerator[int, None]:
        with tracer.span("run"):
            yield 1
            yield 2

    gen = stream()
    assert await gen.__anext__() == 1
    await gen.aclose()
    assert [(s.name, s.error) for s in tracer.spans] == [("run", None)]
    with tracer.span("model_call"):
        pass
    assert tracer.spans[-1].parent is None  # the closed span no longer counts as current


def test_console_tracer_writes_one_line_per_finished_span() -> None:
    out = io.StringIO()
    tracer = ConsoleTracer(stream=out, clock=Ticks())
    with tracer.span("run", agent="a"), tracer.span("tool_call", name="add", call_id="c1"):
        pass
    assert out.getvalue().splitlines() == [
        "[lovia] tool_call 1000.0ms name='add' call_id='c1'",
        "[lovia] run 3000.0ms agent='a'",
    ]


def test_console_tracer_reports_errors() -> None:
    out = io.StringIO()
    tracer = ConsoleTracer(stream=out, clock=Ticks())
    with pytest.raises(KeyError), tracer.span("model_call"):
        raise KeyError("x")
    assert out.getvalue() == "[lovia] model_call 1000.0ms error=KeyError: 'x'\n"


def test_console_tracer_skips_spans_shorter_than_the_threshold() -> None:
    out = io.StringIO()
    tracer = ConsoleTracer(min_duration_ms=1500.0, stream=out, clock=Ticks())
    with tracer.span("run"), tracer.span("tool_call"):
        pass
    assert out.getvalue() == "[lovia] run 3000.0ms\n"


def test_console_tracer_defaults_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    with ConsoleTracer().span("handoff", from_agent="a", to_agent="b"):
        pass
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("[lovia] handoff ")
    assert captured.err.endswith("ms from_agent='a' to_agent='b'\n")
