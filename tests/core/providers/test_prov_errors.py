"""Error classification: retryability, Retry-After, context overflow and its window."""

from __future__ import annotations

import json

import httpx
import pytest
from lovia.exceptions import ContextOverflowError, ProviderError
from lovia.providers.errors import (
    error_from_response,
    error_from_transport,
    is_context_overflow,
    parse_retry_after,
    reported_window_of,
    stream_error,
)


def err(status: int, body: object, headers: dict[str, str] | None = None) -> ProviderError:
    text = body if isinstance(body, str) else json.dumps(body)
    return error_from_response(status, text, headers, vendor="openai", model="m")


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504, 529])
def test_retryable_statuses(status: int) -> None:
    e = err(status, {"error": {"message": "x"}})
    assert e.retryable and e.status_code == status and e.hint


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 422])
def test_other_4xx_are_final(status: int) -> None:
    e = err(status, {"error": {"message": "nope"}})
    assert not e.retryable and e.retry_after is None
    assert "nope" in str(e) and "Hint:" in str(e)


def test_retry_after_seconds_ms_and_http_date() -> None:
    assert parse_retry_after({"Retry-After": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert (
        parse_retry_after({"Retry-After": "Wed, 21 Oct 2015 07:28:10 GMT"}, now=1445412480.0)
        == 10.0
    )
    assert (
        parse_retry_after({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, now=1445412490.0) == 0.0
    )
    assert parse_retry_after({"Retry-After": "soon"}) is None
    assert parse_retry_after({}) is None
    assert err(429, {"error": {"message": "slow down"}}, {"Retry-After": "7"}).retry_after == 7.0


OVERFLOWS = [
    (
        400,
        {
            "error": {
                "message": "This model's maximum context length is 8192 tokens. However, your "
                "messages resulted in 9000 tokens.",
                "code": "context_length_exceeded",
            }
        },
        8192,
    ),
    (400, {"error": {"message": "Input too long", "code": "context_length_exceeded"}}, None),
    (
        400,
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "prompt is too long: 210,345 tokens > 200,000 maximum",
            },
        },
        200_000,
    ),
    (
        400,
        {
            "error": {
                "message": "litellm.BadRequestError: AnthropicException - prompt is too long: "
                "250000 tokens > 200000 maximum"
            }
        },
        200_000,
    ),
    (
        400,
        {
            "error": {
                "message": "This model's maximum context length is 4096 tokens. However, you "
                "requested 5000 tokens (4000 in the messages, 1000 in the completion)."
            }
        },
        4096,
    ),
    (
        400,
        {
            "error": {
                "code": 400,
                "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 5000,
                "n_ctx": 4096,
            }
        },
        4096,
    ),
    (
        413,
        {"error": {"type": "request_too_large", "message": "Request exceeds the maximum size"}},
        None,
    ),
    (
        400,
        "The input (9000 tokens) is longer than the model's context length of 8,192 tokens.",
        8192,
    ),
    (  # Mistral
        400,
        {
            "object": "error",
            "message": "Prompt contains 40000 tokens and 0 draft tokens, too large for model "
            "with 32768 maximum context length",
        },
        32768,
    ),
    (  # Gemini's OpenAI-compatible endpoint
        400,
        [
            {
                "error": {
                    "message": "The input token count (1200000) exceeds the maximum number of "
                    "tokens allowed (1048576)."
                }
            }
        ],
        1_048_576,
    ),
    (  # Hugging Face TGI
        422,
        {
            "error": "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. "
            "Given: 5000 `inputs` tokens and 20 `max_new_tokens`",
            "error_type": "validation",
        },
        4096,
    ),
]


@pytest.mark.parametrize(("status", "body", "window"), OVERFLOWS)
def test_context_overflow_detection_and_window(
    status: int, body: object, window: int | None
) -> None:
    e = err(status, body)
    assert isinstance(e, ContextOverflowError)
    assert not e.retryable and e.reported_window == window and e.hint


def test_rate_limits_are_never_overflow_and_their_numbers_are_refused() -> None:
    tpm = {
        "error": {
            "message": "Rate limit reached for gpt-4o on tokens per min (TPM): Limit 30000, Used "
            "29000, Requested 5000.",
            "code": "rate_limit_exceeded",
        }
    }
    e = err(429, tpm)
    assert not isinstance(e, ContextOverflowError) and e.retryable
    assert not is_context_overflow(
        400, "Request too large for gpt-4o: tokens per min (TPM): Limit 30000, Requested 50000"
    )
    assert (
        reported_window_of("maximum context length is 30000 tokens per minute rate limit") is None
    )


def test_implausible_numbers_are_rejected_and_the_smallest_anchor_wins() -> None:
    assert reported_window_of("maximum context length is 12 tokens") is None
    assert reported_window_of("maximum context length is 999999999999 tokens") is None
    assert (
        reported_window_of("maximum context length is 32768 tokens; context window of 16384 tokens")
        == 16384
    )


@pytest.mark.parametrize(
    "message",
    [
        "Invalid value for 'temperature'",
        "max_tokens: 100000 > 64000, which is the maximum allowed number of output tokens",
        "max_tokens is too large: 10000. This model supports at most 4096 completion tokens",
    ],
)
def test_a_plain_400_is_not_an_overflow(message: str) -> None:
    assert not isinstance(err(400, {"error": {"message": message}}), ContextOverflowError)


def test_errors_inside_a_stream() -> None:
    overloaded = stream_error(
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        vendor="anthropic",
        model="c",
    )
    assert overloaded.retryable and "Overloaded" in str(overloaded)
    overflow = stream_error(
        {"error": {"message": "prompt is too long: 5000 tokens > 4096 maximum"}},
        vendor="anthropic",
        model="c",
    )
    assert isinstance(overflow, ContextOverflowError) and overflow.reported_window == 4096
    bad = stream_error(
        {"error": {"message": "invalid tool schema", "type": "invalid_request_error"}},
        vendor="openai",
        model="m",
    )
    assert not bad.retryable


@pytest.mark.parametrize(
    ("payload", "status", "retryable"),
    [
        ({"error": {"message": "slow down", "code": 429}}, 429, True),
        ({"error": {"message": "upstream died", "code": "503"}}, 503, True),
        ({"object": "error", "message": "bad request", "code": 400}, 400, False),
        ({"error": {"message": "x", "code": "invalid_prompt"}}, None, False),
    ],
)
def test_a_status_inside_a_stream_error_classifies_it(
    payload: dict[str, object], status: int | None, retryable: bool
) -> None:
    e = stream_error(payload, vendor="openai", model="m")
    assert (e.status_code, e.retryable) == (status, retryable)


def test_non_json_error_bodies_are_quoted() -> None:
    e = err(502, "<html><body>Bad gateway</body></html>")
    assert e.retryable and "Bad gateway" in str(e)


def test_a_redirect_names_the_fix() -> None:
    e = err(301, "")
    assert not e.retryable and "base_url" in (e.hint or "")


def test_tls_verification_failures_are_final_and_point_at_the_ca_settings() -> None:
    failure = httpx.ConnectError(
        "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: self-signed certificate"
    )
    e = error_from_transport(failure, vendor="openai", model="m")
    assert not e.retryable and "LOVIA_HTTP_CA_BUNDLE" in (e.hint or "")
    refused = error_from_transport(httpx.ConnectError("connection refused"), vendor="x", model="m")
    assert refused.retryable and "base_url" in (refused.hint or "")


def test_a_404_hint_names_each_vendors_url_convention() -> None:
    chat = error_from_response(404, "", vendor="openai", model="m")
    claude = error_from_response(404, "", vendor="anthropic", model="c")
    assert "/v1" in (chat.hint or "") and "host root" in (claude.hint or "")
    assert "or the same with /v1" in (claude.hint or "")  # both forms are accepted
    assert (claude.hint or "").endswith("appends /v1/messages)")
