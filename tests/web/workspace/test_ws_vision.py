"""describe_image: a vision model looks for a main model that cannot."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from lovia import Agent, Runner
from lovia.events import ToolCallCompleted
from lovia.parts import ImagePart, TextPart
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import InputEntry, ToolResultEntry
from lovia.web.vision import make_describe_image_tool, with_vision_delegation

from .conftest import PNG, ws_agent


async def _results(agent: Agent[Any], message: str = "go") -> list[ToolCallCompleted]:
    handle = Runner.stream(agent, message)
    return [e async for e in handle if isinstance(e, ToolCallCompleted)]


async def test_the_vision_model_answers_for_the_main_model(root: Path) -> None:
    vision = ScriptedProvider([text("a tiny red square")], supports_vision=True)
    main = ws_agent(
        root, call("describe_image", {"path": "logo.png", "question": "what colour?"}), text("ok")
    )
    agent = await with_vision_delegation(main, vision)
    results = await _results(agent)
    assert results[0].output == "a tiny red square" and not results[0].is_error
    seen = [e for e in vision.views[0] if isinstance(e, InputEntry) and e.role == "user"][-1]
    assert isinstance(seen.content, tuple)
    assert seen.content[0] == TextPart("what colour?")
    assert isinstance(seen.content[1], ImagePart) and seen.content[1].mime_type == "image/png"
    assert isinstance(main.model, ScriptedProvider)
    offered = main.model.tools[0]
    assert "describe_image" in offered and "view_image" not in offered


async def test_it_is_registered_only_when_it_helps(root: Path) -> None:
    vision = ScriptedProvider([], supports_vision=True)
    blind = ws_agent(root)
    seeing = ws_agent(root, vision=True)
    no_workspace = Agent(name="plain", model=ScriptedProvider([]))
    assert await with_vision_delegation(blind, None) is blind
    assert await with_vision_delegation(seeing, vision) is seeing
    assert await with_vision_delegation(no_workspace, vision) is no_workspace
    added = await with_vision_delegation(blind, vision)
    assert [t.name for t in added.tools] == ["describe_image"]
    assert await with_vision_delegation(added, vision) is added  # never twice


async def test_the_workspace_acl_and_the_size_cap_apply(root: Path) -> None:
    (root / "huge.png").write_bytes(PNG + b"\x00" * 5_000_000)
    (root / "note.txt").write_text("not an image")
    vision = ScriptedProvider([text("never used")], supports_vision=True)
    main = ws_agent(
        root,
        call("describe_image", {"path": ".env.png"}, call_id="secret"),
        call("describe_image", {"path": "huge.png"}, call_id="huge"),
        call("describe_image", {"path": "note.txt"}, call_id="text"),
        call("describe_image", {"path": "missing.png"}, call_id="missing"),
        call("describe_image", {}, call_id="noargs"),
        text("done"),
        denied_paths=(".env*",),
    )
    (root / ".env.png").write_bytes(PNG)
    results = await _results(await with_vision_delegation(main, vision))
    by_id = {r.call.id: r for r in results}
    assert all(r.is_error for r in results), [r.output for r in results]
    assert "denied" in by_id["secret"].output
    assert "5000000-byte limit" in by_id["huge"].output
    assert "not a supported image" in by_id["text"].output
    assert vision.views == []  # the vision model was never asked


async def test_a_path_the_policy_asks_about_needs_approval(root: Path) -> None:
    outside = root.parent / "shot.png"
    outside.write_bytes(PNG)
    workspace = ws_agent(root).workspace
    tool = make_describe_image_tool(ScriptedProvider([]), workspace)  # type: ignore[arg-type]
    predicate: Any = tool.needs_approval
    session = await workspace.open()  # type: ignore[union-attr]
    ctx = SimpleNamespace(workspace=session)
    assert await predicate({"path": str(outside)}, ctx) is True
    assert await predicate({"path": "logo.png"}, ctx) is False
    assert await predicate({"path": 5}, ctx) is True
    # without a run session, the tool opens one of its own workspace
    assert await predicate({"path": "logo.png"}, SimpleNamespace(workspace=None)) is False
    await session.close()


async def test_a_bad_vision_profile_fails_the_call_not_the_run(root: Path) -> None:
    main = ws_agent(root, call("describe_image", {"path": "logo.png"}), text("carried on"))
    agent = await with_vision_delegation(main, "nosuchvendor:vision-model")
    assert [t.name for t in agent.tools] == ["describe_image"]
    result = await Runner.run(agent, "go")
    assert result.output == "carried on"
    failed = [e for e in result.entries if isinstance(e, ToolResultEntry)]
    assert failed and "vision model could not describe" in failed[0].output
