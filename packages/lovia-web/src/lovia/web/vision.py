"""Vision delegation: ``describe_image(path, question)`` for an agent whose model has no vision.

``make_describe_image_tool(vision_model, workspace)`` builds the tool: it reads the image
through the run's workspace session (``ctx.workspace``, or a session of ``workspace`` opened
for the call), so the workspace ACL applies and a path the policy marks ``ask`` goes through
the approval channel; images over ``MAX_IMAGE_BYTES`` (5 MB) are refused. The image and the
question go to ``vision_model`` in a one-turn run, and its answer is the tool's result.

A vision model that cannot be reached or built (a bad profile: an unknown prefix, a missing
key, a dead endpoint) fails the call with a ``ToolError`` the main model sees, never the run.

``with_vision_delegation(agent, vision_model)`` adds the tool to ``agent`` only when it makes
sense: a vision model is configured, the agent's model lacks vision (so the workspace's
``view_image`` is not offered to it: the two never appear together), the agent has a local
workspace, and it has no ``describe_image`` or ``view_image`` of its own.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

from lovia.exceptions import InvalidToolArguments, LoviaError, ToolError
from lovia.parts import ImagePart, TextPart
from lovia.tools.base import Tool
from lovia.workspace import (
    FileTooLargeError,
    LocalWorkspace,
    LocalWorkspaceSession,
    WorkspaceError,
)

from .attachments import is_image_bytes, model_has_vision
from .files import INLINE_MIMES, local_workspace

if TYPE_CHECKING:
    from lovia.agent import Agent
    from lovia.providers.base import Provider
    from lovia.run_context import RunContext

__all__ = [
    "MAX_IMAGE_BYTES",
    "make_describe_image_tool",
    "with_vision_delegation",
]

MAX_IMAGE_BYTES = 5_000_000
"""``describe_image`` refuses larger images."""

_MIMES = {s: INLINE_MIMES[s] for s in (".png", ".jpg", ".jpeg", ".gif", ".webp", ".avif")}
_INSTRUCTIONS = (
    "You describe images for another assistant that cannot see them. Answer the question "
    "about the image precisely and concisely; transcribe any visible text that matters."
)
_DEFAULT_QUESTION = "Describe this image in detail."


def _arg(args: dict[str, Any], key: str, default: str | None = None) -> str:
    value = args.get(key, default)
    if not isinstance(value, str) or (default is None and not value.strip()):
        raise InvalidToolArguments(f"{key} must be a non-empty string")
    return value


def make_describe_image_tool(
    vision_model: Provider | str, workspace: LocalWorkspace | None = None
) -> Tool:
    """The ``describe_image(path, question)`` tool (see the module docstring)."""

    async def session_for(ctx: RunContext[Any]) -> tuple[LocalWorkspaceSession, bool]:
        if isinstance(ctx.workspace, LocalWorkspaceSession):
            return ctx.workspace, False
        if workspace is None:
            raise WorkspaceError(
                "describe_image needs a workspace session",
                hint="give the agent a workspace: Agent(workspace=Workspace.local('.'))",
            )
        return await workspace.open(), True

    async def needs_approval(args: dict[str, Any], ctx: RunContext[Any]) -> bool:
        try:
            session, owned = await session_for(ctx)
            try:
                return session.decide_path(_arg(args, "path")) == "ask"
            finally:
                if owned:
                    await session.close()
        except (LoviaError, OSError, ValueError, TypeError):  # fail closed
            return True

    async def describe_image(args: dict[str, Any], ctx: RunContext[Any]) -> str:
        path = _arg(args, "path")
        question = _arg(args, "question", _DEFAULT_QUESTION).strip() or _DEFAULT_QUESTION
        mime = _MIMES.get("." + path.rsplit(".", 1)[-1].lower()) if "." in path else None
        if mime is None:
            raise WorkspaceError(
                f"{path!r} is not a supported image",
                hint="use a .png, .jpg, .gif, .webp or .avif file",
            )
        session, owned = await session_for(ctx)
        try:
            data = await session.read_bytes(path, MAX_IMAGE_BYTES)
        finally:
            if owned:
                await session.close()
        if data.truncated:
            raise FileTooLargeError(
                f"{data.path!r} is {data.size} bytes, over the {MAX_IMAGE_BYTES}-byte limit",
                hint="downscale it first (ImageMagick: convert in.png -resize 50% out.png)",
            )
        if not is_image_bytes(data.data, mime):
            raise WorkspaceError(
                f"{data.path!r} is not a {mime.removeprefix('image/')} image",
                hint="its bytes do not start like one; pass a real image file",
            )
        image = ImagePart(data=base64.b64encode(data.data).decode("ascii"), mime_type=mime)
        return await _ask(vision_model, question, image)

    return Tool(
        name="describe_image",
        description="Ask a vision model about an image file in the workspace (png, jpg, "
        "gif, webp, avif; at most 5 MB). Pass the question you need answered.",
        parameters={
            "type": "object",
            "properties": {"path": {"type": "string"}, "question": {"type": "string"}},
            "required": ["path"],
        },
        invoke=describe_image,
        needs_approval=needs_approval,
    )


async def _ask(vision_model: Provider | str, question: str, image: ImagePart) -> str:
    from lovia.agent import Agent
    from lovia.messages import user
    from lovia.runner import Runner

    agent: Agent[Any] = Agent(
        name="vision", instructions=_INSTRUCTIONS, model=vision_model, retry=None
    )
    try:
        result = await Runner.run(agent, [user([TextPart(question), image])], max_turns=1)
    except LoviaError as exc:
        raise ToolError(
            f"the vision model could not describe the image ({type(exc).__name__})",
            hint="continue without it, or ask the user to check the vision model settings",
        ) from None
    return str(result.output)


async def with_vision_delegation(
    agent: Agent[Any], vision_model: Provider | str | None
) -> Agent[Any]:
    """``agent`` with ``describe_image`` added when delegation applies (see the module
    docstring), else ``agent`` itself."""
    workspace = local_workspace(agent.workspace)
    if vision_model is None or workspace is None:
        return agent
    if any(t.name in ("describe_image", "view_image") for t in agent.tools):
        return agent
    if await model_has_vision(agent):
        return agent
    return agent.clone(tools=(*agent.tools, make_describe_image_tool(vision_model, workspace)))
