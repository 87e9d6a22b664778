"""Run options, developer-facing diagnostics and the runtime's seams (issues 10 and 11)."""

from __future__ import annotations

import ast
import asyncio
import contextvars
import logging
from pathlib import Path
from typing import Any

import pytest
from lovia import Agent, Runner, Usage, UserError, tool
from lovia.context_policy import CompactionRequest, ContextResult
from lovia.events import ToolCallCompleted
from lovia.exceptions import LoviaError, ProviderError
from lovia.messages import InvalidArguments, ToolCall
from lovia.runner import RunOptions
from lovia.runtime.config import RUN_OPTIONS
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import ToolResultEntry, entry_from_dict, entry_to_dict

CORE = Path(__file__).resolve().parents[3] / "packages" / "lovia-core" / "src"


# -- 10.1: policy tools only where there can be something to recall -----------------------


class _RecallPolicy:
    """A policy shipping a recall tool, like lovia-context's ``Compaction``."""

    def tools(self) -> list[Any]:
        @tool
        def recall_tool_result(call_id: str) -> str:
            """Recall a cleared result."""
            return call_id

        return [recall_tool_result]

    async def compact(self, req: CompactionRequest) -> ContextResult:
        return ContextResult(entries=req.entries)


async def test_an_agent_without_tools_is_not_sent_the_recall_tool() -> None:
    provider = ScriptedProvider([text("hello")])
    await Runner.run(Agent("chat", model=provider), "hi", context_policy=_RecallPolicy())
    assert provider.tools == [()]


async def test_an_agent_with_tools_gets_the_recall_tool_on_every_turn() -> None:
    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    provider = ScriptedProvider([call("ping", {}), text("done")])
    await Runner.run(Agent("a", model=provider, tools=[ping]), "hi", context_policy=_RecallPolicy())
    assert provider.tools == [("ping", "recall_tool_result")] * 2


async def test_a_toolless_agent_gets_recall_when_its_history_has_tool_results() -> None:
    from lovia.stores import InMemorySession

    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    session = InMemorySession()
    first = ScriptedProvider([call("ping", {}), text("done")])
    await Runner.run(Agent("a", model=first, tools=[ping]), "hi", session=session, session_id="s")
    second = ScriptedProvider([text("again"), text("and again")])
    for prompt in ("more", "more"):
        await Runner.run(
            Agent("chat", model=second),
            prompt,
            session=session,
            session_id="s",
            context_policy=_RecallPolicy(),
        )
    assert second.tools == [("recall_tool_result",)] * 2  # stable across runs and turns


# -- 10.5: run options are validated where RunOptions is checked --------------------------


def test_the_run_options_are_the_run_configs_fields() -> None:
    assert set(RUN_OPTIONS) == set(RunOptions.__annotations__)


def test_runner_run_lists_every_run_option_in_its_docstring() -> None:
    doc = Runner.run.__doc__ or ""
    assert [name for name in RUN_OPTIONS if f"``{name}``" not in doc] == []


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"max_turns": "3"}, "max_turns"),
        ({"max_turns": True}, "max_turns"),
        ({"max_turns": 0}, "max_turns"),
        ({"max_turns": -2}, "max_turns"),
        ({"budget": {"max_total_tokens": 5}}, "budget"),
        ({"retry": 3}, "retry"),
        ({"cancel_token": "stop"}, "cancel_token"),
        ({"mailbox": []}, "mailbox"),
        ({"extra_instructions": ["be brief"]}, "extra_instructions"),
        ({"context_policy": "compaction"}, "context_policy"),
        ({"tracer": object()}, "tracer"),
        ({"session": "chat.db", "session_id": "s"}, "session"),
        ({"session_id": 42}, "session_id"),
        ({"lease_timeout": -1.0}, "lease_timeout"),
        ({"lease_timeout": "5"}, "lease_timeout"),
        ({"checkpoint": "run-1"}, "checkpoint"),
    ],
)
async def test_a_bad_option_value_is_a_user_error_naming_it(
    options: dict[str, Any], named: str
) -> None:
    provider = ScriptedProvider([text("x")])
    with pytest.raises(UserError, match=named) as info:
        await Runner.run(Agent("a", model=provider), "hi", **options)
    assert info.value.hint
    assert provider.calls == []  # nothing ran


def test_a_misspelt_option_gets_a_did_you_mean() -> None:
    with pytest.raises(UserError, match=r"max_turn \(did you mean max_turns\?\)") as info:
        Runner.stream(Agent("a", model=ScriptedProvider([])), "hi", max_turn=3)  # type: ignore[call-arg]
    assert "max_turns" in (info.value.hint or "")


async def test_a_negative_lease_timeout_with_a_session_is_rejected() -> None:
    from lovia.stores import InMemorySession

    with pytest.raises(UserError, match="lease_timeout"):
        await Runner.run(
            Agent("a", model=ScriptedProvider([text("x")])),
            "hi",
            session=InMemorySession(),
            session_id="s",
            lease_timeout=-0.5,
        )


# -- 10.6: a failing tool's exception is visible to the developer -------------------------


async def test_a_raising_tool_carries_its_traceback_and_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    @tool
    def explode() -> str:
        """Explode."""
        raise KeyError("missing-config")

    provider = ScriptedProvider([call("explode", {}), text("sorry")])
    handle = Runner.stream(Agent("a", model=provider, tools=[explode]), "go")
    with caplog.at_level(logging.WARNING, logger="lovia.runtime"):
        completed = [e async for e in handle if isinstance(e, ToolCallCompleted)]
    result = await handle.result()
    failure = completed[0].failure
    assert failure is not None
    assert failure.type == "KeyError" and "missing-config" in failure.message
    assert "raise KeyError" in failure.traceback and "in explode" in failure.traceback
    entry = next(e for e in result.entries if isinstance(e, ToolResultEntry))
    assert entry.metadata == {"error": failure.to_dict()}
    stored = entry_from_dict(entry_to_dict(entry))
    assert isinstance(stored, ToolResultEntry) and stored.metadata == entry.metadata
    record = next(r for r in caplog.records if "tool.error" in r.getMessage())
    assert record.levelno == logging.WARNING and record.exc_info is not None
    # The model's view is unchanged: the metadata is not part of the result's output.
    assert "Traceback" not in entry.output


async def test_a_successful_call_has_no_failure() -> None:
    @tool
    def fine() -> str:
        """Fine."""
        return "ok"

    provider = ScriptedProvider([call("fine", {}), text("done")])
    events = [e async for e in Runner.stream(Agent("a", model=provider, tools=[fine]), "go")]
    completed = [e for e in events if isinstance(e, ToolCallCompleted)]
    assert completed[0].failure is None


# -- 10.8: ToolCall.args -------------------------------------------------------------------


def test_tool_call_args_parses_or_marks_invalid_json() -> None:
    assert ToolCall("c", "t", '{"path": "a.txt"}').args == {"path": "a.txt"}
    assert ToolCall("c", "t", "").args == {}
    bad = ToolCall("c", "t", '{"path": ').args
    assert isinstance(bad, InvalidArguments) and not bad
    assert bad.raw == '{"path": ' and "JSON" in bad.error
    assert isinstance(ToolCall("c", "t", "[1, 2]").args, InvalidArguments)


# -- 11.2: the child's usage rides on the result, and on the failure ----------------------


async def test_a_failed_sub_run_still_charges_the_parent() -> None:
    spent = Usage(input_tokens=30, output_tokens=5)
    child = Agent(
        "child",
        model=ScriptedProvider(
            [
                call("nothing_here", {}, usage=spent),
                ProviderError("child model down", retryable=False),
            ]
        ),
        retry=None,
    )
    parent_model = ScriptedProvider([call("ask_child", {"input": "help"}), text("done")])
    parent = Agent("parent", model=parent_model, tools=[child.as_tool()])
    result = await Runner.run(parent, "go")
    assert result.usage.input_tokens == 30 and result.usage.output_tokens == 5


async def test_a_failed_run_carries_its_usage_on_the_error() -> None:
    spent = Usage(input_tokens=7, output_tokens=1)
    provider = ScriptedProvider([call("missing", {}, usage=spent), ProviderError("down")])
    with pytest.raises(ProviderError) as info:
        await Runner.run(Agent("a", model=provider, retry=None), "go")
    usage = info.value.run_usage  # type: ignore[attr-defined]
    assert usage.input_tokens == 7 and usage.requests == 1


# -- 11.5: RunHandle misuse ----------------------------------------------------------------


async def test_iterating_a_handle_twice_is_a_lovia_error_with_a_hint() -> None:
    handle = Runner.stream(Agent("a", model=ScriptedProvider([text("x")])), "go")
    async for _ in handle:
        pass
    with pytest.raises(LoviaError, match="only once") as info:
        async for _ in handle:
            pass
    assert info.value.hint


async def test_an_abandoned_handle_is_a_lovia_error_with_a_hint() -> None:
    handle = Runner.stream(Agent("a", model=ScriptedProvider([text("abc")])), "go")
    async for _ in handle:
        break
    with pytest.raises(LoviaError, match="abandoned") as info:
        await handle.result()
    assert info.value.hint


# -- 11.2: no import cycle in lovia-core at run time ---------------------------------------


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(CORE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _runtime_imports(path: Path, module: str, known: set[str]) -> set[str]:
    """Modules of ``known`` that ``module`` imports when it runs (not under TYPE_CHECKING)."""
    tree = ast.parse(path.read_text())
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for branch in node.orelse:
                visit(branch)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return {name for name in found if name in known and name != module}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def walk(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                return [*stack[stack.index(target) :], target]
            if target not in state:
                found = walk(target)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = walk(node)
            if found:
                return found
    return None


def test_lovia_core_has_no_runtime_import_cycle() -> None:
    paths = {_module_name(p): p for p in (CORE / "lovia").rglob("*.py")}
    known = set(paths)
    # A package's ``__init__`` runs before its submodules; the facade's lazy map is not an
    # import edge, and a submodule importing its parent package is the normal case.
    graph = {
        name: {
            target
            for target in _runtime_imports(path, name, known)
            if not name.startswith(target + ".")
        }
        for name, path in paths.items()
    }
    assert "lovia.runner" in graph["lovia.agent_tool"]  # the test sees function-local imports
    assert _cycle(graph) is None, f"import cycle: {' -> '.join(_cycle(graph) or [])}"


# -- 11.6: a lone call runs inline, with a task's isolation ---------------------------------

_probe: contextvars.ContextVar[str] = contextvars.ContextVar("probe", default="unset")


async def test_a_lone_calls_context_changes_stay_with_the_call_as_in_a_task() -> None:
    seen: list[str] = []

    @tool
    async def setter() -> str:
        """Sets the probe, completing at once."""
        _probe.set("leaked")
        return "set"

    @tool
    async def suspender() -> str:
        """Sets the probe across a suspension."""
        _probe.set("leaked too")
        await asyncio.sleep(0)
        seen.append(_probe.get())  # the call's own context survives its suspension
        return "set"

    @tool
    async def reader() -> str:
        """Reads the probe (async: in the run's context, not a worker thread's)."""
        return _probe.get()

    provider = ScriptedProvider(
        [call("setter", {}), call("suspender", {}), call("reader", {}), text("done")]
    )
    agent = Agent("c", model=provider, tools=[setter, suspender, reader])
    result = await Runner.run(agent, "go")
    outputs = [e.output for e in result.entries if isinstance(e, ToolResultEntry)]
    assert outputs == ["set", "set", "unset"]
    assert seen == ["leaked too"]
    assert _probe.get() == "unset"
