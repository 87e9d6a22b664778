"""Attachments: path references always, images inlined for vision models only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lovia import Agent
from lovia.parts import ImagePart, TextPart
from lovia.testing import ScriptedProvider, text
from lovia.transcript import InputEntry
from lovia.web.attachments import AttachmentRef, model_has_vision, resolve_attachments

from ..conftest import chat, until
from .conftest import ws_agent

IMAGE = {"path": "logo.png", "mime": "image/png", "kind": "image", "name": "logo.png"}
README = {"path": "README.md", "mime": "text/markdown", "kind": "file", "name": "README.md"}


def _user_input(agent: Agent[Any]) -> InputEntry:
    assert isinstance(agent.model, ScriptedProvider)
    entries = [e for e in agent.model.views[0] if isinstance(e, InputEntry) and e.role == "user"]
    return entries[-1]


async def _send(client: Any, message: str, **body: Any) -> tuple[str, list[Any]]:
    async with chat(client, message, **body) as (session, frames):
        done = await until(frames, "done")
    return session.data["session_id"], done


async def test_a_vision_model_gets_the_image_inline_and_every_path_as_text(
    make_app: Any, asgi_client: Any, root: Path
) -> None:
    agent = ws_agent(root, text("I see it"), vision=True)
    client = await asgi_client(make_app(agent))
    sid, done = await _send(client, "what is this?", attachments=[IMAGE, README])
    assert done[-1].data["status"] == "completed"
    content = _user_input(agent).content
    assert isinstance(content, tuple)
    assert isinstance(content[0], TextPart) and content[0].text.startswith("what is this?")
    assert "[attached: logo.png (image/png)]" in content[0].text
    assert "[attached: README.md (text/markdown)]" in content[0].text
    images = [p for p in content if isinstance(p, ImagePart)]
    assert len(images) == 1 and images[0].mime_type == "image/png"
    # the image part survives the stored history
    detail = (await client.get(f"/api/sessions/{sid}")).json()
    stored = [e for e in detail["entries"] if e["type"] == "input" and e["role"] == "user"]
    assert any(p.get("type") == "image" for p in stored[0]["content"])


async def test_a_model_without_vision_gets_references_only(
    make_app: Any, asgi_client: Any, root: Path
) -> None:
    agent = ws_agent(root, text("noted"), vision=False)
    client = await asgi_client(make_app(agent))
    await _send(client, "look", attachments=[IMAGE, {"path": "doc.pdf"}])
    content = _user_input(agent).content
    assert isinstance(content, str) and "[attached: logo.png (image/png)]" in content
    assert "[attached: doc.pdf (application/pdf)]" in content  # a missing mime is guessed


async def test_invalid_attachments_are_dropped_and_all_invalid_is_a_422(
    make_app: Any, asgi_client: Any, root: Path
) -> None:
    (root.parent / "outside.txt").write_text("x")
    agent = ws_agent(root, text("ok"), vision=True)
    client = await asgi_client(make_app(agent))
    bad = [
        {"path": "../outside.txt"},
        {"path": "missing.txt"},
        {"path": ".env"},
        {"path": "/etc/passwd", "kind": "image"},
        {"path": "src"},
    ]
    r = await client.post("/api/chat/stream", json={"message": "hi", "attachments": bad})
    assert r.status_code == 422 and "attachments" in r.json()["detail"]
    await _send(client, "one good", attachments=[*bad, README])
    content = _user_input(agent).content
    assert isinstance(content, str)
    assert content.count("[attached:") == 1 and "outside" not in content


async def test_an_agent_without_a_workspace_ignores_attachments(
    make_app: Any, asgi_client: Any
) -> None:
    agent = Agent(name="plain", model=ScriptedProvider([text("ok")]))
    client = await asgi_client(make_app(agent))
    await _send(client, "hello", attachments=[{"path": "../nowhere"}])
    assert _user_input(agent).content == "hello"


async def test_the_attachment_list_is_validated(
    make_app: Any, asgi_client: Any, root: Path
) -> None:
    client = await asgi_client(make_app(ws_agent(root)))
    many = [README] * 21
    r = await client.post("/api/chat/stream", json={"message": "hi", "attachments": many})
    assert r.status_code == 422 and "attachments" in r.json()["detail"]
    odd = [{"path": "a", "kind": "video"}]
    r = await client.post("/api/chat/stream", json={"message": "hi", "attachments": odd})
    assert r.status_code == 422 and "kind" in r.json()["detail"]


async def test_a_model_string_is_asked_for_its_vision_flag(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    assert await model_has_vision(Agent(name="a", model="anthropic:claude-x")) is True
    assert await model_has_vision(Agent(name="a", model="nosuchvendor:model")) is False
    assert await model_has_vision(Agent(name="a")) is False


async def test_svg_and_symlinks_out_are_never_inlined(root: Path) -> None:
    (root.parent / "outside.png").write_bytes(b"\x89PNG")
    (root / "out.png").symlink_to(root.parent / "outside.png")
    agent = ws_agent(root, vision=True)
    refs = [
        AttachmentRef("icon.svg", "image/svg+xml", "image"),
        AttachmentRef("out.png", "image/png", "image"),
    ]
    result = await resolve_attachments(agent, "see", refs)
    assert isinstance(result, str)
    assert "[attached: icon.svg (image/svg+xml)]" in result and "out.png" not in result


async def test_an_oversized_image_stays_a_reference(root: Path) -> None:
    (root / "huge.png").write_bytes(b"\x89PNG" + b"\x00" * 5_000_001)
    agent = ws_agent(root, vision=True)
    result = await resolve_attachments(
        agent, "see", [AttachmentRef("huge.png", "image/png", "image")]
    )
    assert isinstance(result, str) and "[attached: huge.png (image/png)]" in result


async def test_inlined_images_are_bounded_per_message(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import lovia.web.attachments as attachments

    monkeypatch.setattr(attachments, "MAX_INLINE_TOTAL_BYTES", 2_500)
    for i in range(4):
        (root / f"p{i}.png").write_bytes(b"\x89PNG" + bytes(1_000))
    refs = [AttachmentRef(f"p{i}.png", "image/png", "image") for i in range(4)]
    result = await resolve_attachments(ws_agent(root, vision=True), "see", refs)
    assert isinstance(result, list)
    assert sum(isinstance(p, ImagePart) for p in result) == 2
    assert isinstance(result[0], TextPart) and result[0].text.count("[attached:") == 4
