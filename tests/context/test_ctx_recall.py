from __future__ import annotations

from lovia.context import Compaction, InMemoryResultStore, result_digest
from lovia.tools.recall import make_recall_tool
from lovia.transcript import ToolResultEntry

from .ctx_support import run_context, transcript


class BrokenStore:
    def get(self, key: str) -> str | None:
        raise OSError("disk gone")


async def test_store_is_read_first_by_digest() -> None:
    store = InMemoryResultStore()
    store.put("d" * 64, "archived output")
    tool = make_recall_tool(store)
    assert tool.name == "recall_tool_result"
    assert await tool.invoke({"ref": "d" * 64}, run_context([])) == "archived output"


async def test_falls_back_to_the_transcript_by_call_id_then_by_digest() -> None:
    entries = transcript(3, 20)
    tool = make_recall_tool(InMemoryResultStore())
    ctx = run_context(entries)
    first = next(e for e in entries if isinstance(e, ToolResultEntry))
    assert await tool.invoke({"ref": first.call_id}, ctx) == first.output
    assert await tool.invoke({"ref": f" {first.call_id}\n"}, ctx) == first.output
    assert await tool.invoke({"ref": result_digest(first.output)}, ctx) == first.output


async def test_call_id_wins_over_a_digest_scan() -> None:
    # A call id that happens to look like a digest of another output still means the call.
    other = ToolResultEntry("x", "other")
    tricky = ToolResultEntry(result_digest("other"), "mine")
    tool = make_recall_tool(None)
    assert await tool.invoke({"ref": tricky.call_id}, run_context([other, tricky])) == "mine"


async def test_missing_ref_and_store_failure_fall_back_gracefully() -> None:
    entries = transcript(1, 20)
    tool = make_recall_tool(BrokenStore())
    ctx = run_context(entries)
    assert await tool.invoke({"ref": "call_0"}, ctx) == "0:" + "x" * 20
    missing = await tool.invoke({"ref": "nope"}, ctx)
    assert "nope" in missing and "not re-run" in missing
    assert "needs ref" in await tool.invoke({}, ctx)


async def test_shared_store_keeps_sessions_apart() -> None:
    # Two sessions reuse call_0 with different outputs; recall by call id reads each
    # session's own transcript, never the other's archive.
    store = InMemoryResultStore()
    a, b = transcript(1, 10), transcript(1, 30)
    for entries in (a, b):
        out = entries[3].output  # type: ignore[union-attr]
        store.put(result_digest(out), out)
    tool = make_recall_tool(store)
    assert await tool.invoke({"ref": "call_0"}, run_context(a)) == a[3].output  # type: ignore[union-attr]
    assert await tool.invoke({"ref": "call_0"}, run_context(b)) == b[3].output  # type: ignore[union-attr]


def test_compaction_ships_recall_over_its_store() -> None:
    store = InMemoryResultStore()
    tools = Compaction(store=store).tools()
    assert [t.name for t in tools] == ["recall_tool_result"]
    assert tools[0].parameters["required"] == ["ref"]


async def test_a_call_id_recalls_the_archived_output_after_the_session_was_trimmed() -> None:
    from lovia import Agent, Runner, tool
    from lovia.context import OffloadToolResults
    from lovia.stores.memory import InMemorySession
    from lovia.testing import ScriptedProvider, call, text

    big = "report line\n" * 1_251 + "end"  # 15,015 chars
    assert len(big) > 15_000

    @tool
    def report(n: int) -> str:
        """Produce report n."""
        return f"{n}:{big}"

    store = InMemoryResultStore()
    session = InMemorySession()
    first = ScriptedProvider(
        [call("report", {"n": i}, call_id=f"r{i}") for i in range(6)] + [text("read them")]
    )
    policy = Compaction(context_window=16_000, stages=[OffloadToolResults()], store=store)
    agent: Agent[None] = Agent(name="a", model=first, tools=[report], context_policy=policy)
    await Runner.run(agent, "read six reports", session=session, session_id="s")
    assert any(
        isinstance(e, ToolResultEntry) and e.call_id == "r0" and "offloaded" in e.output
        for e in first.views[-1]
    ), "the first report was offloaded to the store"
    assert await session.trim_tool_results("s", keep_chars=155, keep_runs=0) > 0
    stored = next(
        e for e in await session.load("s") if isinstance(e, ToolResultEntry) and e.call_id == "r0"
    )
    assert len(stored.output) < 400  # the record itself now holds the trimmed text only

    second = ScriptedProvider([call("recall_tool_result", {"ref": "r0"}, call_id="x"), text("ok")])
    fresh = Compaction(context_window=16_000, stages=[OffloadToolResults()], store=store)
    again = agent.clone(model=second, context_policy=fresh)
    result = await Runner.run(again, "show report 0 again", session=session, session_id="s")
    recalled = next(
        e for e in result.entries if isinstance(e, ToolResultEntry) and e.call_id == "x"
    )
    assert recalled.output == f"0:{big}"
