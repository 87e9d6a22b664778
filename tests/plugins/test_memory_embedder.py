"""OpenAIEmbedder against a local server speaking OpenAI's /embeddings wire format."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lovia.exceptions import ProviderError, UserError
from lovia.plugins import Doc, KeywordIndex, OpenAIEmbedder, VectorIndex

from .memory_support import embed_text, embeddings_server


async def test_batches_keep_input_order_and_send_the_key_and_options() -> None:
    texts = [f"text number {i}" for i in range(5)]
    with embeddings_server() as (url, seen):
        embedder = OpenAIEmbedder(
            "emb-model", dimensions=64, batch_size=2, base_url=url, api_key="sk-test"
        )
        vectors = await embedder.embed(texts)
    assert vectors == [embed_text(t) for t in texts]  # the server replied in reverse order
    assert [r["body"]["input"] for r in seen] == [texts[0:2], texts[2:4], texts[4:5]]
    assert {r["path"] for r in seen} == {"/v1/embeddings"}
    assert all(r["body"]["model"] == "emb-model" and r["body"]["dimensions"] == 64 for r in seen)
    assert seen[0]["headers"]["authorization"] == "Bearer sk-test"
    assert embedder.id == "openai:emb-model:64"


async def test_empty_input_sends_nothing() -> None:
    with embeddings_server() as (url, seen):
        assert await OpenAIEmbedder(base_url=url).embed([]) == []
    assert seen == []


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (lambda body, h: (500, {"error": {"message": "boom"}}), "HTTP 500"),
        (lambda body, h: (401, {"error": {"message": "bad key"}}), "HTTP 401"),
        (lambda body, h: (200, "not json"), "malformed"),
        (lambda body, h: (200, {"data": [{"index": 0}]}), "malformed"),
        (
            lambda body, h: (200, {"data": [{"index": 0, "embedding": [1.0]}]}),
            "1 vectors for 2 texts",
        ),
    ],
)
async def test_failures_raise_provider_error(reply: Any, message: str) -> None:
    with embeddings_server(reply) as (url, _), pytest.raises(ProviderError, match=message) as info:
        await OpenAIEmbedder(base_url=url).embed(["a", "b"])
    if "HTTP 500" in message:
        assert info.value.retryable and info.value.status_code == 500


async def test_an_unreachable_endpoint_is_a_provider_error() -> None:
    from tests.support import free_port

    embedder = OpenAIEmbedder(base_url=f"http://127.0.0.1:{free_port()}/v1")
    with pytest.raises(ProviderError, match="could not be reached"):
        await embedder.embed(["a"])


def test_configuration_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "LOVIA_EMBEDDING_BASE_URL",
        "LOVIA_EMBEDDING_API_KEY",
        "OPENAI_BASE_URL",
        "OPENAI_API_KEY",
    ):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(UserError, match="no API key for the official endpoint"):
        OpenAIEmbedder()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/openai/")
    assert OpenAIEmbedder().base_url == "http://127.0.0.1:1/openai"
    monkeypatch.setenv("LOVIA_EMBEDDING_BASE_URL", "http://127.0.0.1:1/lovia")
    monkeypatch.setenv("LOVIA_EMBEDDING_API_KEY", "sk-lovia")
    embedder = OpenAIEmbedder()
    assert embedder.base_url == "http://127.0.0.1:1/lovia" and embedder._key == "sk-lovia"
    assert OpenAIEmbedder(base_url="http://127.0.0.1:2/v1").base_url == "http://127.0.0.1:2/v1"
    with pytest.raises(UserError):
        OpenAIEmbedder(batch_size=0)


async def test_hybrid_search_over_the_real_wire(tmp_path: Path) -> None:
    with embeddings_server() as (url, _):
        archive = tmp_path / "archive.db"
        hybrid = KeywordIndex(archive) | VectorIndex(archive, OpenAIEmbedder(base_url=url))
        await hybrid.add(
            [Doc("tea", "green tea every morning"), Doc("ops", "deploys happen on fridays")]
        )
        hits = await hybrid.search("fridays deploys", k=2)
    assert hits[0].doc.id == "ops"
