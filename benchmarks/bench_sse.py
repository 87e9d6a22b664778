"""SSE parse throughput per adapter: a 10,000-chunk stream through the SSE parser and the
adapter's stream decoder (wire bytes in, deltas out), fed in 4 KiB network reads.

Usage: uv run python benchmarks/bench_sse.py [CHUNKS] [REPEATS]
Target (issue 4): at least 200,000 chunks per second per adapter.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from lovia.providers.anthropic import MessagesStreamDecoder
from lovia.providers.base import ModelDelta
from lovia.providers.openai_chat import ChatStreamDecoder
from lovia.providers.openai_responses import ResponsesStreamDecoder
from lovia.providers.sse import SSEParser

TARGET = 200_000
READ = 4096


def _frame(payload: dict[str, Any], event: str | None = None) -> str:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(payload, separators=(',', ':'))}\n\n"


def openai_stream(n: int) -> bytes:
    base = {
        "id": "chatcmpl-123",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o-mini",
    }
    out = [
        _frame(
            {
                **base,
                "choices": [
                    {
                        "index": 0,
                        "delta": {"content": f"tok{i} "},
                        "logprobs": None,
                        "finish_reason": None,
                    }
                ],
            }
        )
        for i in range(n - 2)
    ]
    out.append(_frame({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}))
    out.append(
        _frame({**base, "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": n}})
    )
    return ("".join(out) + "data: [DONE]\n\n").encode()


def anthropic_stream(n: int) -> bytes:
    out = [
        _frame(
            {
                "type": "message_start",
                "message": {"id": "msg", "usage": {"input_tokens": 9, "output_tokens": 1}},
            },
            "message_start",
        ),
        _frame(
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
            "content_block_start",
        ),
    ]
    out += [
        _frame(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": f"tok{i} "},
            },
            "content_block_delta",
        )
        for i in range(n - 5)
    ]
    out.append(_frame({"type": "content_block_stop", "index": 0}, "content_block_stop"))
    out.append(
        _frame(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": n},
            },
            "message_delta",
        )
    )
    out.append(_frame({"type": "message_stop"}, "message_stop"))
    return "".join(out).encode()


def responses_stream(n: int) -> bytes:
    out = [
        _frame(
            {
                "type": "response.output_text.delta",
                "item_id": "msg_1",
                "output_index": 0,
                "content_index": 0,
                "delta": f"tok{i} ",
            },
            "response.output_text.delta",
        )
        for i in range(n - 1)
    ]
    out.append(
        _frame(
            {
                "type": "response.completed",
                "response": {
                    "status": "completed",
                    "usage": {"input_tokens": 9, "output_tokens": n},
                },
            },
            "response.completed",
        )
    )
    return "".join(out).encode()


def run_once(data: bytes, make: Callable[[], Any]) -> tuple[float, int]:
    parser = SSEParser()
    decoder = make()
    out: list[ModelDelta] = []
    deltas = 0
    t0 = time.perf_counter()
    for start in range(0, len(data), READ):
        for event in parser.feed(data[start : start + READ]):
            decoder.handle(event, out)
        deltas += len(out)
        out.clear()
    for event in parser.close():
        decoder.handle(event, out)
    decoder.finish(parser)
    return time.perf_counter() - t0, parser.events_seen


def main() -> None:
    chunks = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    cases = {
        "openai-chat": (openai_stream(chunks), lambda: ChatStreamDecoder("m")),
        "anthropic": (anthropic_stream(chunks), lambda: MessagesStreamDecoder("m")),
        "openai-responses": (responses_stream(chunks), lambda: ResponsesStreamDecoder("m")),
    }
    ok = True
    print(f"{chunks} chunks per stream, {READ}-byte reads, {repeats} runs")
    for name, (data, make) in cases.items():
        samples = []
        events = 0
        for _ in range(repeats):
            seconds, events = run_once(data, make)
            samples.append(seconds)
        rate = events / statistics.median(samples)
        best = events / min(samples)
        ok &= rate >= TARGET
        print(
            f"{name:18s} {rate:12,.0f} chunks/s median, {best:10,.0f} best "
            f"({statistics.median(samples) * 1000:6.1f} ms, {len(data) / 1e6:.2f} MB)"
        )
    print("target", f"{TARGET:,}", "chunks/s:", "met" if ok else "MISSED")


if __name__ == "__main__":
    main()
