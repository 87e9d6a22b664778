"""Content parts: text, images and files inside inputs and tool results.

A part has exactly one source (``url`` or base64 ``data``). lovia never downloads a URL
part itself; providers pass URLs through. Base64 data needs a mime type and is validated
when the part is built.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Union

from .exceptions import UserError

__all__ = [
    "ContentPart",
    "FilePart",
    "ImagePart",
    "TextPart",
    "coerce_parts",
    "image_mime",
    "normalize_content",
    "project_parts",
    "text_of",
]

_IMAGE_MIMES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}


def image_mime(path: str | Path) -> str:
    """The image mime type for ``path``'s suffix; raises ``UserError`` for an unknown one."""
    suffix = Path(path).suffix.lower()
    try:
        return _IMAGE_MIMES[suffix]
    except KeyError:
        raise UserError(
            f"cannot infer an image type from {str(path)!r}",
            hint=f"use one of {', '.join(sorted(_IMAGE_MIMES))} or pass mime_type=",
        ) from None


def _check_source(kind: str, url: str | None, data: str | None, mime_type: str | None) -> None:
    if (url is None) == (data is None):
        raise UserError(f"{kind} needs exactly one of url= or data=")
    if data is not None:
        if not mime_type:
            raise UserError(f"{kind} with base64 data needs a mime_type")
        try:
            base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise UserError(
                f"{kind} data is not valid base64", hint="pass raw bytes to from_bytes"
            ) from exc


def _decoded_size(data: str | None) -> int:
    if not data:
        return 0
    return len(data) * 3 // 4 - data[-2:].count("=")


@dataclass(frozen=True, slots=True)
class TextPart:
    """A piece of text."""

    text: str
    type: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class ImagePart:
    """An image, by URL or base64 ``data`` with its ``mime_type``."""

    url: str | None = None
    data: str | None = None
    mime_type: str | None = None
    detail: Literal["auto", "low", "high"] | None = None
    type: Literal["image"] = "image"

    def __post_init__(self) -> None:
        _check_source("ImagePart", self.url, self.data, self.mime_type)

    @classmethod
    def from_path(
        cls, path: str | Path, *, detail: Literal["auto", "low", "high"] | None = None
    ) -> ImagePart:
        """Read an image file; the mime type comes from its suffix."""
        mime = image_mime(path)
        raw = Path(path).read_bytes()
        return cls(data=base64.b64encode(raw).decode("ascii"), mime_type=mime, detail=detail)

    @classmethod
    def from_bytes(cls, raw: bytes, mime_type: str) -> ImagePart:
        return cls(data=base64.b64encode(raw).decode("ascii"), mime_type=mime_type)

    @property
    def byte_size(self) -> int:
        """Decoded size of inline data (0 for URL parts)."""
        return _decoded_size(self.data)


@dataclass(frozen=True, slots=True)
class FilePart:
    """A document (PDF, text, ...), by URL or base64 ``data`` with its ``mime_type``."""

    url: str | None = None
    data: str | None = None
    mime_type: str | None = None
    filename: str | None = None
    type: Literal["file"] = "file"

    def __post_init__(self) -> None:
        _check_source("FilePart", self.url, self.data, self.mime_type)

    @classmethod
    def from_path(cls, path: str | Path, *, mime_type: str | None = None) -> FilePart:
        import mimetypes  # lazy: it imports urllib, which `import lovia` should not pay for

        p = Path(path)
        mime = mime_type or mimetypes.guess_type(p.name)[0]
        if not mime:
            raise UserError(f"cannot infer a mime type for {str(p)!r}", hint="pass mime_type=")
        return cls.from_bytes(p.read_bytes(), mime, filename=p.name)

    @classmethod
    def from_bytes(cls, raw: bytes, mime_type: str, *, filename: str | None = None) -> FilePart:
        return cls(
            data=base64.b64encode(raw).decode("ascii"), mime_type=mime_type, filename=filename
        )

    @classmethod
    def from_base64(cls, data: str, mime_type: str, *, filename: str | None = None) -> FilePart:
        return cls(data=data, mime_type=mime_type, filename=filename)

    @classmethod
    def from_url(
        cls, url: str, *, mime_type: str | None = None, filename: str | None = None
    ) -> FilePart:
        return cls(url=url, mime_type=mime_type, filename=filename)

    @property
    def byte_size(self) -> int:
        return _decoded_size(self.data)


ContentPart = Union[TextPart, ImagePart, FilePart]
"""One typed piece of content."""

_PART_TYPES = (TextPart, ImagePart, FilePart)


def coerce_parts(
    value: str | ContentPart | list[ContentPart] | tuple[ContentPart, ...],
) -> tuple[ContentPart, ...]:
    """A str, one part or a list of parts as a tuple of parts.

    A bare ``str`` inside a list is rejected rather than coerced, so a list of strings
    passed by mistake fails loudly.
    """
    if isinstance(value, str):
        return (TextPart(value),)
    if isinstance(value, _PART_TYPES):
        return (value,)
    parts = tuple(value)
    for part in parts:
        if not isinstance(part, _PART_TYPES):
            raise UserError(
                f"expected a content part, got {type(part).__name__}",
                hint="wrap text in TextPart(...) inside a list of parts",
            )
    return parts


def normalize_content(
    value: str | ContentPart | list[ContentPart] | tuple[ContentPart, ...],
) -> str | tuple[ContentPart, ...]:
    """Plain text stays a ``str``; anything else becomes a tuple of parts."""
    if isinstance(value, str):
        return value
    parts = coerce_parts(value)
    if all(isinstance(p, TextPart) for p in parts) and len(parts) == 1:
        return parts[0].text  # type: ignore[union-attr]  # narrowed by the all() above
    return parts


def project_parts(parts: tuple[ContentPart, ...] | list[ContentPart]) -> str:
    """A text projection: text verbatim, binaries as size markers."""
    out: list[str] = []
    for part in parts:
        if isinstance(part, TextPart):
            out.append(part.text)
        elif isinstance(part, ImagePart):
            if part.url is not None:
                out.append(f"[image: {part.url}]")
            else:
                out.append(f"[image: {part.mime_type}, {part.byte_size} bytes]")
        else:
            name = f"{part.filename}, " if part.filename else ""
            src = part.url if part.url is not None else f"{part.byte_size} bytes"
            out.append(f"[file: {name}{part.mime_type or 'unknown type'}, {src}]")
    return "\n".join(out)


def text_of(content: str | tuple[ContentPart, ...] | list[ContentPart]) -> str:
    """The text of content: a string as is, parts through ``project_parts``."""
    if isinstance(content, str):
        return content
    return project_parts(content)
