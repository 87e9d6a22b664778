"""Error bodies as proxies and Gemini's OpenAI-compatible endpoint send them, replayed by a
local server: the message quotes what they say, not their markup or JSON wrapping."""

from __future__ import annotations

import pytest
from lovia import Agent, NoopContextPolicy, Runner
from lovia.exceptions import ContextOverflowError, ProviderError
from lovia.providers.openai_chat import OpenAIChatProvider

from .prov_wire_server import Reply, wire_server

NGINX_502 = (
    b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad "
    b"Gateway</h1></center>\r\n<hr><center>nginx/1.25.3</center>\r\n</body>\r\n</html>\r\n"
)
CLOUDFLARE_504 = (
    b'<!DOCTYPE html>\n<!--[if lt IE 7]> <html class="no-js ie6 oldie" lang="en-US"> '
    b"<![endif]-->\n<html><head><title>api.example.com | 504: Gateway time-out</title>"
    b'<style>body{margin:0}</style></head><body><div id="cf-wrapper">'
    + b"<span>Cloudflare</span>" * 200
    + b"</div></body></html>"
)
UNTITLED_503 = (
    b"<html><body><h1>Service Unavailable</h1><p>Back soon &amp; sorry.</p></body></html>"
)
GEMINI_429 = (
    b'[{\n  "error": {\n    "code": 429,\n    "message": "Resource has been exhausted (e.g. '
    b'check quota).",\n    "status": "RESOURCE_EXHAUSTED"\n  }\n}\n]'
)
GEMINI_OVERFLOW = (
    b'[{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum '
    b'number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}]'
)


async def _fail(reply: Reply) -> ProviderError:
    async with wire_server(reply) as srv:
        provider = OpenAIChatProvider("gemini-2.5-flash", base_url=srv.url + "/v1")
        agent = Agent(name="a", model=provider, context_policy=NoopContextPolicy(), retry=None)
        try:
            with pytest.raises(ProviderError) as caught:
                await Runner.run(agent, "hi")
        finally:
            await provider.aclose()
    return caught.value


@pytest.mark.parametrize(
    ("status", "body", "said"),
    [
        (502, NGINX_502, "an HTML page: 502 Bad Gateway"),
        (504, CLOUDFLARE_504, "an HTML page: api.example.com | 504: Gateway time-out"),
        (503, UNTITLED_503, "an HTML page: Service Unavailable Back soon & sorry."),
    ],
)
async def test_an_html_error_page_is_quoted_by_its_title(
    status: int, body: bytes, said: str
) -> None:
    error = await _fail(Reply(body, status=status, content_type="text/html"))
    assert error.message.endswith(f"HTTP {status} for model 'gemini-2.5-flash': {said}")
    assert error.retryable and "<" not in error.message


async def test_a_list_wrapped_error_is_unwrapped() -> None:
    error = await _fail(Reply(GEMINI_429, status=429, content_type="application/json"))
    assert "HTTP 429 for model 'gemini-2.5-flash': Resource has been exhausted" in error.message
    assert error.retryable and "[{" not in error.message


async def test_a_list_wrapped_overflow_keeps_its_window() -> None:
    error = await _fail(Reply(GEMINI_OVERFLOW, status=400, content_type="application/json"))
    assert isinstance(error, ContextOverflowError)
    assert error.reported_window == 1_048_576
    assert "The input token count (1200000) exceeds" in error.message and "[{" not in error.message
