"""``POST /api/render``: model-written markdown to sanitised HTML (``lovia.web.render``).

Rendering runs in a worker thread, ``_RENDER_SLOTS`` requests at a time, so a long text
never stalls the event loop's streams and a burst of renders waits its turn.
"""

from __future__ import annotations

import asyncio
import weakref

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..models import error_responses
from ..render import render_markdown

__all__ = ["RenderRequest", "RenderResult", "render", "router"]

router = APIRouter(prefix="/api")

_MAX_TEXTS = 200
_MAX_TEXT_CHARS = 400_000
_MAX_TOTAL_CHARS = 1_000_000
_RENDER_SLOTS = 2
"""Renders at once (CPU-bound, in threads): more requests wait their turn."""
_slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
    weakref.WeakKeyDictionary()
)
"""One semaphore per event loop (a semaphore is bound to the loop it first waits in)."""


class RenderRequest(BaseModel):
    """``POST /api/render``: markdown texts to render, in order."""

    model_config = ConfigDict(extra="forbid")

    texts: list[str] = Field(min_length=1, max_length=_MAX_TEXTS)
    workspace_images: bool = False
    """Point workspace-relative image paths at ``/api/workspace/raw`` (else they are links)."""

    @field_validator("texts")
    @classmethod
    def _bounded(cls, texts: list[str]) -> list[str]:
        for i, text in enumerate(texts):
            if len(text) > _MAX_TEXT_CHARS:
                raise ValueError(f"texts[{i}] is longer than {_MAX_TEXT_CHARS} characters")
        if sum(map(len, texts)) > _MAX_TOTAL_CHARS:
            raise ValueError(f"the texts together are longer than {_MAX_TOTAL_CHARS} characters")
        return texts


class RenderResult(BaseModel):
    html: list[str]
    """Sanitised HTML, one per text."""


@router.post("/render", response_model=RenderResult, responses=error_responses(422))
async def render(body: RenderRequest) -> RenderResult:
    """Markdown to sanitised HTML (markdown-it-py, Pygments, nh3), one per text."""
    slots = _slots.setdefault(asyncio.get_running_loop(), asyncio.Semaphore(_RENDER_SLOTS))
    base = "/api/workspace/raw?path=" if body.workspace_images else None

    def run() -> list[str]:
        return [render_markdown(t, image_base=base) for t in body.texts]

    async with slots:  # off the event loop: a long text must not stall the streams
        return RenderResult(html=await asyncio.to_thread(run))
