"""OpenTelemetryTracer: lovia spans exported with GenAI semantic-convention names."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest

from tests.support import require

try:
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanKind, StatusCode

    HAVE_OTEL_SDK = True
except ImportError:  # pragma: no cover - the dev group installs the SDK
    HAVE_OTEL_SDK = False

from lovia.exceptions import UserError
from lovia.tracing_otel import OpenTelemetryTracer


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    require(HAVE_OTEL_SDK, "opentelemetry-sdk is not installed")
    return InMemorySpanExporter()


@pytest.fixture
def tracer(exporter: InMemorySpanExporter) -> OpenTelemetryTracer:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return OpenTelemetryTracer(tracer_provider=provider)


def by_name(exporter: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    return {span.name: span for span in exporter.get_finished_spans()}


def test_run_model_and_tool_spans_follow_the_genai_conventions(
    tracer: OpenTelemetryTracer, exporter: InMemorySpanExporter
) -> None:
    with tracer.span("run", agent="helper", run_id="r1", session_id="s1") as run:
        with tracer.span("model_call", model="gpt-x", turn=1) as call:
            call.set_attribute("input_tokens", 120)
            call.set_attribute("output_tokens", 30)
        with tracer.span("tool_call", name="add", call_id="c1"):
            pass
        run.set_attribute("total_tokens", 150)
    spans = by_name(exporter)
    assert sorted(spans) == ["chat gpt-x", "execute_tool add", "invoke_agent helper"]
    assert dict(spans["invoke_agent helper"].attributes or {}) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "helper",
        "gen_ai.conversation.id": "s1",
        "lovia.run_id": "r1",
        "lovia.total_tokens": 150,
    }
    assert dict(spans["chat gpt-x"].attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-x",
        "gen_ai.usage.input_tokens": 120,
        "gen_ai.usage.output_tokens": 30,
        "lovia.turn": 1,
    }
    assert dict(spans["execute_tool add"].attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "add",
        "gen_ai.tool.call.id": "c1",
    }
    kinds = {name: span.kind for name, span in spans.items()}
    assert kinds == {
        "invoke_agent helper": SpanKind.INTERNAL,
        "chat gpt-x": SpanKind.CLIENT,
        "execute_tool add": SpanKind.INTERNAL,
    }


def test_child_spans_are_parented_to_the_run_span(
    tracer: OpenTelemetryTracer, exporter: InMemorySpanExporter
) -> None:
    with tracer.span("run", agent="a"), tracer.span("tool_call", name="t", call_id="c"):
        pass
    spans = by_name(exporter)
    tool, run = spans["execute_tool t"], spans["invoke_agent a"]
    assert tool.parent is not None and run.context is not None
    assert tool.parent.span_id == run.context.span_id
    assert tool.context is not None and tool.context.trace_id == run.context.trace_id


async def test_parenting_crosses_tasks_started_inside_the_span(
    tracer: OpenTelemetryTracer, exporter: InMemorySpanExporter
) -> None:
    async def tool(name: str) -> None:
        with tracer.span("tool_call", name=name, call_id=name):
            await asyncio.sleep(0)

    with tracer.span("run", agent="a"):
        await asyncio.gather(tool("x"), tool("y"))
    spans = by_name(exporter)
    run_context = spans["invoke_agent a"].context
    assert run_context is not None
    parents = [spans[n].parent for n in ("execute_tool x", "execute_tool y")]
    assert [p.span_id if p else None for p in parents] == [run_context.span_id] * 2


def test_an_error_sets_status_error_type_and_records_the_exception(
    tracer: OpenTelemetryTracer, exporter: InMemorySpanExporter
) -> None:
    with pytest.raises(ValueError, match="bad"), tracer.span("tool_call", name="t", call_id="c"):
        raise ValueError("bad")
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code == StatusCode.ERROR
    assert span.status.description == "ValueError: bad"
    assert (span.attributes or {})["error.type"] == "ValueError"
    assert [(e.name, (e.attributes or {})["exception.type"]) for e in span.events] == [
        ("exception", "ValueError")
    ]


def test_handoff_spans_have_no_genai_operation_and_none_values_are_dropped(
    tracer: OpenTelemetryTracer, exporter: InMemorySpanExporter
) -> None:
    with tracer.span("handoff", from_agent="triage", to_agent="billing", reason=None) as span:
        span.set_attribute("ignored", None)
    (recorded,) = exporter.get_finished_spans()
    assert recorded.name == "handoff billing"
    assert dict(recorded.attributes or {}) == {
        "lovia.from_agent": "triage",
        "lovia.to_agent": "billing",
    }


def test_a_span_without_its_subject_uses_the_bare_operation_name(
    tracer: OpenTelemetryTracer, exporter: InMemorySpanExporter
) -> None:
    attrs: dict[str, Any] = {}
    with tracer.span("model_call", **attrs):
        pass
    assert [s.name for s in exporter.get_finished_spans()] == ["chat"]
    assert exporter.get_finished_spans()[0].status.status_code == StatusCode.UNSET


def test_missing_opentelemetry_is_a_user_error_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A None entry makes the import fail as if the package were not installed.
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    with pytest.raises(UserError) as info:
        OpenTelemetryTracer()
    assert info.value.hint == "pip install opentelemetry-api"


async def test_a_real_run_exports_nested_genai_spans(
    tracer: OpenTelemetryTracer, exporter: InMemorySpanExporter
) -> None:
    from lovia import Agent, Runner, Usage, tool
    from lovia.testing import ScriptedProvider, call, text

    @tool
    def add(a: int, b: int) -> int:
        return a + b

    provider = ScriptedProvider(
        [call("add", {"a": 1, "b": 2}, call_id="c1", usage=Usage(5, 1)), text("3")]
    )
    agent = Agent(name="calc", model=provider, tools=[add])
    result = await Runner.run(agent, "1+2?", tracer=tracer)
    assert result.output == "3"
    finished = exporter.get_finished_spans()
    assert [s.name for s in finished] == [
        "chat scripted-model",
        "execute_tool add",
        "chat scripted-model",
        "invoke_agent calc",
    ]
    run = finished[-1]
    assert run.context is not None
    assert all(
        s.parent is not None and s.parent.span_id == run.context.span_id for s in finished[:-1]
    )
    assert (run.attributes or {})["lovia.turns"] == 2
    assert (finished[1].attributes or {})["gen_ai.tool.call.id"] == "c1"
    chat = dict(finished[0].attributes or {})
    assert chat["gen_ai.provider.name"] == "scripted"
    assert (chat["gen_ai.usage.input_tokens"], chat["gen_ai.usage.output_tokens"]) == (5, 1)
    assert all(s.status.status_code == StatusCode.UNSET for s in finished)
