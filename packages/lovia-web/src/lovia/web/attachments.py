"""Chat attachments: workspace files a user message points at.

``resolve_attachments(agent, message, attachments)`` turns a ``ChatRequest``'s attachments
into the run's input:

* every attachment is re-validated against the agent's workspace root, exactly like a panel
  path (``lovia.web.files``: no traversal, no escaping symlink, no hidden or denied file) and
  must be an existing regular file; invalid ones are dropped, and when every one is invalid
  the request is refused (``AttachmentsInvalid``, a 422);
* every valid attachment becomes a workspace path reference appended to the message text
  (``[attached: uploads/report.pdf (application/pdf)]``), so the agent can open it with its
  own tools;
* an ``image`` attachment is also inlined as an ``ImagePart`` when the agent's model has
  vision (``model_has_vision``: the provider's ``supports_vision``, the same flag the core
  uses to hide image-returning tools) and the file is a png/jpeg/gif/webp/avif of at most
  ``MAX_INLINE_IMAGE_BYTES`` (and ``MAX_INLINE_TOTAL_BYTES`` for the message) whose bytes
  start like that format; otherwise it stays a reference;
* an agent without a local workspace ignores attachments (the message is sent as is).

The result is the plain message text when nothing is inlined, else a list of parts
(``TextPart`` then the ``ImagePart``s), which ``RunSupervisor.start`` accepts.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from lovia.exceptions import LoviaError
from lovia.parts import ContentPart, ImagePart, TextPart

from .errors import WebError
from .files import INLINE_MIMES, WorkspaceFiles, local_workspace

if TYPE_CHECKING:
    from lovia.agent import Agent

    from .models import ChatRequest
    from .supervisor import RunSupervisor

__all__ = [
    "AttachmentRef",
    "AttachmentsInvalid",
    "MAX_INLINE_IMAGE_BYTES",
    "MAX_INLINE_TOTAL_BYTES",
    "chat_input",
    "is_image_bytes",
    "model_has_vision",
    "resolve_attachments",
]

MAX_INLINE_IMAGE_BYTES = 5_000_000
"""An image attachment larger than this is referenced, not inlined."""
MAX_INLINE_TOTAL_BYTES = 20_000_000
"""Images of one message are inlined up to this total; the rest are references."""

_VISION_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp", ".avif")
_VISION_MIMES = {suffix: INLINE_MIMES[suffix] for suffix in _VISION_SUFFIXES}


class AttachmentsInvalid(WebError):
    """Every attachment of the request was invalid (missing, outside the root, denied)."""

    status = 422


@dataclass(frozen=True, slots=True)
class AttachmentRef:
    """What the resolver needs of an attachment (``lovia.web.models.Attachment`` has it)."""

    path: str
    mime: str | None = None
    kind: Literal["image", "file"] = "file"
    name: str | None = None


async def model_has_vision(agent: Agent[Any]) -> bool:
    """Whether the agent's model accepts images: a ``Provider``'s ``supports_vision``; for a
    model string, the flag of the provider it resolves to (built, read, closed; a string
    that cannot be built counts as no vision)."""
    from lovia.providers.base import supports_vision

    model = agent.model
    if model is None:
        return False
    if not isinstance(model, str):
        return supports_vision(model)
    from lovia.providers.registry import provider_from_string

    try:
        provider = provider_from_string(model)
    except (LoviaError, ValueError, TypeError, OSError):  # the run itself will report it
        return False
    try:
        return supports_vision(provider)
    finally:
        close = getattr(provider, "aclose", None)
        if close is not None:
            await close()


async def resolve_attachments(
    agent: Agent[Any], message: str, attachments: Sequence[Any]
) -> str | list[ContentPart]:
    """The run input for ``message`` with ``attachments`` (see the module docstring).

    ``attachments`` are ``AttachmentRef``-shaped objects (``path``, ``mime``, ``kind``,
    ``name``). Raises ``AttachmentsInvalid`` when there were some and none is valid.
    """
    workspace = local_workspace(agent.workspace)
    if not attachments or workspace is None:
        return message
    files = WorkspaceFiles(workspace)
    valid: list[tuple[Any, str, Path]] = []
    for attachment in attachments:
        try:
            rel, real = files.locate(attachment.path)
        except WebError:
            continue
        if rel == "." or not real.is_file():
            continue
        valid.append((attachment, rel, real))
    if not valid:
        raise AttachmentsInvalid(
            "attachments: none of the attached files exists in the workspace",
            hint="attach workspace-relative paths of existing files (upload them first)",
        )
    vision = any(a.kind == "image" for a, _, _ in valid) and await model_has_vision(agent)
    lines = [message, ""]
    images: list[ContentPart] = []
    inlined = 0
    for attachment, rel, _real in valid:
        mime = attachment.mime or _guess_mime(rel)
        lines.append(f"[attached: {rel} ({mime})]")
        suffix = Path(rel).suffix.lower()
        if vision and attachment.kind == "image" and suffix in _VISION_MIMES:
            room = min(MAX_INLINE_IMAGE_BYTES, MAX_INLINE_TOTAL_BYTES - inlined)
            image = await _inline(files, rel, _VISION_MIMES[suffix], room)
            if image is not None:
                images.append(image)
                inlined += image.byte_size
    text = "\n".join(lines)
    if not images:
        return text
    return [TextPart(text), *images]


def _guess_mime(path: str) -> str:
    import mimetypes  # lazy: it imports urllib

    return mimetypes.guess_type(path)[0] or "application/octet-stream"


async def _inline(files: WorkspaceFiles, rel: str, mime: str, room: int) -> ImagePart | None:
    if room <= 0:
        return None
    try:
        data = await files.read_bytes(rel, room)
    except WebError:
        return None
    if data is None or not is_image_bytes(data, mime):
        return None
    encoded = await asyncio.to_thread(base64.b64encode, data)
    return ImagePart(data=encoded.decode("ascii"), mime_type=mime)


def is_image_bytes(data: bytes, mime: str) -> bool:
    """Whether ``data`` starts like a ``mime`` image: a file named ``.png`` holding HTML
    stays a reference rather than reaching the provider as a broken image."""
    if mime == "image/png":
        return data.startswith(b"\x89PNG")
    if mime == "image/jpeg":
        return data.startswith(b"\xff\xd8\xff")
    if mime == "image/gif":
        return data.startswith((b"GIF87a", b"GIF89a"))
    if mime == "image/webp":
        return data[:4] == b"RIFF" and data[8:12] == b"WEBP"
    if mime == "image/avif":
        return data[4:8] == b"ftyp" and data[8:12] in (b"avif", b"avis")
    return False


async def chat_input(supervisor: RunSupervisor, request: ChatRequest) -> str | list[ContentPart]:
    """``request``'s message with its attachments resolved for the agent that will run it:
    the chat's stored agent when it still exists, else the requested one, else the default
    (with none of those, the message as is: ``start`` reports the agent problem)."""
    if not request.attachments:
        return request.message
    name = request.agent if request.agent is not None else supervisor.default_agent
    if request.session_id is not None:
        meta = await supervisor.store.get_session(request.session_id)
        if meta is not None and meta.agent in supervisor.agents:
            name = meta.agent
    agent = supervisor.agents.get(name) if name is not None else None
    if agent is None:
        return request.message
    return await resolve_attachments(agent, request.message, request.attachments)
