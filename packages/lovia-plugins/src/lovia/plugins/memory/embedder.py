"""``OpenAIEmbedder``: an ``Embedder`` over an OpenAI-compatible ``/embeddings`` endpoint.

Configuration: arguments first, then ``LOVIA_EMBEDDING_BASE_URL`` / ``LOVIA_EMBEDDING_API_KEY``,
then ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``. The official endpoint needs a key (a
``UserError`` when the embedder is built); local servers may need none.

Texts go in batches of ``batch_size``; each reply's vectors are put back in input order by
their ``index`` field. An HTTP failure, a malformed reply or a reply with the wrong number
of vectors raises ``ProviderError``. Empty input sends nothing.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from lovia.exceptions import ProviderError, UserError

__all__ = ["OpenAIEmbedder"]

_OFFICIAL = "https://api.openai.com/v1"
_VENDOR = "openai-embeddings"


class OpenAIEmbedder:
    """Embeddings from ``model`` (``text-embedding-3-small`` by default)."""

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        *,
        dimensions: int | None = None,
        batch_size: int = 32,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | None = None,
    ) -> None:
        if batch_size < 1:
            raise UserError(f"batch_size must be >= 1, got {batch_size!r}")
        if dimensions is not None and dimensions < 1:
            raise UserError(f"dimensions must be >= 1, got {dimensions!r}")
        env = os.environ.get
        self.model = model
        self.dimensions = dimensions
        self.batch_size = batch_size
        self.timeout = timeout
        self.base_url = (
            base_url or env("LOVIA_EMBEDDING_BASE_URL") or env("OPENAI_BASE_URL") or _OFFICIAL
        ).rstrip("/")
        self._key = api_key or env("LOVIA_EMBEDDING_API_KEY") or env("OPENAI_API_KEY") or None
        if self.base_url == _OFFICIAL and not self._key:
            raise UserError(
                "OpenAIEmbedder has no API key for the official endpoint",
                hint="set LOVIA_EMBEDDING_API_KEY (or OPENAI_API_KEY), or pass api_key=",
            )

    def __repr__(self) -> str:
        return f"OpenAIEmbedder({self.model!r}, base_url={self.base_url!r})"

    @property
    def id(self) -> str:
        return f"openai:{self.model}:{self.dimensions or 'default'}"

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        from lovia.http_config import make_async_client

        headers = {"authorization": f"Bearer {self._key}"} if self._key else {}
        out: list[list[float]] = []
        async with make_async_client(headers=headers, timeout=self.timeout) as client:
            for start in range(0, len(texts), self.batch_size):
                out.extend(await self._batch(client, list(texts[start : start + self.batch_size])))
        return out

    async def _batch(self, client: Any, batch: list[str]) -> list[list[float]]:
        from lovia.providers.errors import error_from_response, error_from_transport

        body: dict[str, Any] = {"model": self.model, "input": batch}
        if self.dimensions is not None:
            body["dimensions"] = self.dimensions
        try:
            response = await client.post(f"{self.base_url}/embeddings", json=body)
        except Exception as exc:  # httpx's errors become ProviderError
            raise error_from_transport(exc, vendor=_VENDOR, model=self.model) from exc
        if response.status_code >= 300:
            raise error_from_response(
                response.status_code, response.text, response.headers,
                vendor=_VENDOR, model=self.model,
            )  # fmt: skip
        return self._vectors(response, len(batch))

    def _vectors(self, response: Any, expected: int) -> list[list[float]]:
        try:
            items = response.json()["data"]
            pairs = sorted(
                ((int(item["index"]), [float(x) for x in item["embedding"]]) for item in items),
                key=lambda pair: pair[0],
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise ProviderError(
                f"{self.base_url}/embeddings returned a malformed reply: {exc!r}",
                vendor=_VENDOR,
                model=self.model,
                hint="the endpoint must speak OpenAI's /embeddings format",
            ) from exc
        if [i for i, _ in pairs] != list(range(expected)):
            raise ProviderError(
                f"{self.base_url}/embeddings returned {len(pairs)} vectors for {expected} texts",
                vendor=_VENDOR,
                model=self.model,
                hint="the endpoint must return one embedding per input, indexed 0..n-1",
            )
        return [vector for _, vector in pairs]
