"""``validate_connection`` against llmock, a real server speaking both wire formats."""

from __future__ import annotations

import httpx
from lovia.web.config.probe import unlisted_model_note, validate_connection
from lovia.web.config.schema import ModelProfile

from tests.core.providers.conftest import Server
from tests.support import free_port


def _conn(url: str, model: str = "gpt-4o-mini", **fields: object) -> ModelProfile:
    return ModelProfile.model_validate({"model": model, "base_url": url, **fields})


def _scenario(server: Server, *behaviors: dict[str, object]) -> None:
    httpx.post(
        server.url + "/_llmock/scenario", json={"behaviors": list(behaviors)}, timeout=10
    ).raise_for_status()


class _Recording(httpx.AsyncHTTPTransport):
    """The real transport, keeping the headers of each request it sends."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[httpx.Headers] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request.headers)
        return await super().handle_async_request(request)


async def test_reachable_with_the_flavours_auth_header(llmock: Server) -> None:
    wire = _Recording()
    conn = _conn(llmock.url + "/v1", api_key="sk-abc").connection()
    result = await validate_connection(conn, transport=wire)
    assert result.ok and result.status == "ok" and result.note is None
    (headers,) = wire.sent
    assert headers["authorization"] == "Bearer sk-abc"


async def test_anthropic_sends_x_api_key_and_version(llmock: Server) -> None:
    conn = _conn(llmock.url + "/anthropic", "anthropic:claude-sonnet-4-5", api_key="ak-1")
    wire = _Recording()
    result = await validate_connection(conn.connection(), transport=wire)
    assert result.status == "ok", result
    (headers,) = wire.sent
    assert headers["x-api-key"] == "ak-1" and headers["anthropic-version"]
    assert "authorization" not in headers


async def test_a_refused_key_is_an_auth_failure(llmock: Server) -> None:
    _scenario(llmock, {"type": "fail", "status": 401, "message": "bad key", "times": None})
    result = await validate_connection(_conn(llmock.url + "/v1", api_key="wrong").connection())
    assert (result.status, result.ok, result.http_status) == ("auth", False, 401)
    assert "key" in (result.hint or "")


async def test_a_wrong_path_is_told_apart(llmock: Server) -> None:
    result = await validate_connection(_conn(llmock.url + "/nope").connection())
    assert result.status == "wrong_path" and not result.ok
    assert result.hint and "/v1" in result.hint


async def test_a_closed_port_is_unreachable() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    result = await validate_connection(_conn(url).connection(), timeout=5)
    assert result.status == "unreachable" and not result.ok


async def test_an_unlisted_model_is_noted_with_suggestions(llmock: Server) -> None:
    result = await validate_connection(_conn(llmock.url + "/v1", "gpt-4o-minni").connection())
    assert result.ok
    assert result.note and "gpt-4o-minni" in result.note
    assert result.suggestions[0] == "gpt-4o-mini"


async def test_a_server_error_is_reachable_but_failing(llmock: Server) -> None:
    _scenario(llmock, {"type": "fail", "status": 500, "times": None})
    result = await validate_connection(_conn(llmock.url + "/v1").connection())
    assert (result.status, result.http_status) == ("error", 500)


async def test_a_stated_window_is_adopted_but_a_configured_one_wins() -> None:
    payload = {"data": [{"id": "m", "max_model_len": 32768}]}
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json=payload))
    found = await validate_connection(_conn("http://x/v1", "m").connection(), transport=transport)
    assert (found.context_window, found.window_source) == (32768, "endpoint")
    configured = _conn("http://x/v1", "m", context_window=8000)
    kept = await validate_connection(configured.connection(), transport=transport)
    assert (kept.context_window, kept.window_source) == (8000, "configured")
    assert configured.context_window == 8000  # nothing written back


def test_unlisted_note_rules() -> None:
    assert unlisted_model_note("a", []) == (None, [])
    assert unlisted_model_note("org/Model", ["model"]) == (None, [])
    note, near = unlisted_model_note("qwen2", ["qwen2.5", "llama3"])
    assert note and near == ["qwen2.5"]
