"""Shared doubles for the memory tests: a deterministic embedder and a local /embeddings server."""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DIMS = 64


def embed_text(text: str) -> list[float]:
    """A bag-of-words vector: each word hashes to one of DIMS buckets (unit length)."""
    vec = [0.0] * DIMS
    for word in re.findall(r"\w+", text.lower()):
        vec[int(hashlib.md5(word.encode()).hexdigest(), 16) % DIMS] += 1.0
    norm = math.sqrt(sum(x * x for x in vec))
    return [x / norm for x in vec] if norm else vec


class HashEmbedder:
    """A deterministic ``Embedder``; records every batch it was asked for."""

    def __init__(self, id: str = "hash-64") -> None:
        self._id = id
        self.batches: list[list[str]] = []

    @property
    def id(self) -> str:
        return self._id

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.batches.append(list(texts))
        return [embed_text(t) for t in texts]


Reply = Callable[[dict[str, Any], dict[str, str]], tuple[int, Any]]


def openai_reply(body: dict[str, Any], headers: dict[str, str]) -> tuple[int, Any]:
    """OpenAI's /embeddings wire format, with the data deliberately in reverse order."""
    inputs = body["input"]
    data = [
        {"object": "embedding", "index": i, "embedding": embed_text(t)}
        for i, t in enumerate(inputs)
    ]
    return 200, {
        "object": "list",
        "data": list(reversed(data)),
        "model": body["model"],
        "usage": {"prompt_tokens": 1, "total_tokens": 1},
    }


@contextmanager
def embeddings_server(reply: Reply = openai_reply) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A local HTTP server on 127.0.0.1; yields (base_url, recorded requests)."""
    seen: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            body = json.loads(self.rfile.read(length))
            headers = {k.lower(): v for k, v in self.headers.items()}
            seen.append({"path": self.path, "body": body, "headers": headers})
            status, payload = reply(body, headers)
            raw = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
