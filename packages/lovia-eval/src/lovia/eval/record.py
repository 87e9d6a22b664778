"""Record a model's replies once, then replay them offline as deterministic eval cases.

``RecordingProvider`` wraps a real provider: every reply it streams is stored in a
``Recording`` under the hash of the *canonical request*, the request body the run sent
(entries, tools, response format, settings) as JSON with sorted keys, so the key is the
same across processes and dict orderings. The model name is kept beside the recording, not
in the key, so a recording replays whatever the wrapped provider was called.

``ReplayProvider`` serves a recording back without a network. A request the recording does
not hold raises ``RecordingMissError``, naming the first request that diverged and carrying
a unified diff from the recorded request at that position to the one sent. When the same
request was recorded several times, the replies are served in recorded order and the last
one repeats, so a sampled case replays deterministically.

``recorded_case`` turns a recording into a ``Case`` whose input is the recorded run's input
and whose model replays it; ``fork`` re-targets a case at another model (optionally
recording the new replies), which is how a suite built from real sessions is tried on a
new model.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lovia.events import ReasoningDelta, TextDelta
from lovia.exceptions import UserError
from lovia.messages import Usage
from lovia.providers.base import (
    EntryCompletedDelta,
    FinishDelta,
    ModelDelta,
    ModelSettings,
    ToolCallDelta,
    UsageDelta,
)
from lovia.transcript import (
    TranscriptEntry,
    entry_from_dict,
    entry_to_dict,
    leading_system_count,
    to_json_safe,
)

from .errors import RecordingError, RecordingMissError
from .runner import Case

if TYPE_CHECKING:
    from lovia.providers.base import Provider
    from lovia.tools.base import Tool

    from .checks import Check

__all__ = [
    "Interaction",
    "RECORDING_VERSION",
    "Recording",
    "RecordingProvider",
    "ReplayProvider",
    "canonical_request",
    "fork",
    "recorded_case",
    "request_key",
]

RECORDING_VERSION = 1
"""The version written in every recording file; ``Recording.load`` accepts only this one."""

_SCHEMA = "lovia.eval.recording"
_DIFF_LINES = 60


def canonical_request(
    entries: Sequence[TranscriptEntry],
    *,
    tools: Sequence[Tool] = (),
    response_format: dict[str, Any] | None = None,
    settings: ModelSettings | None = None,
) -> dict[str, Any]:
    """The request body a recording is keyed by, as JSON-safe data."""
    return {
        "entries": [entry_to_dict(e) for e in entries],
        "tools": [
            {"name": t.name, "description": t.description, "parameters": to_json_safe(t.parameters)}
            for t in tools
        ],
        "response_format": to_json_safe(response_format),
        "settings": None if settings is None else to_json_safe(settings),
    }


def request_key(request: dict[str, Any]) -> str:
    """The SHA-256 of a canonical request serialised with sorted keys (stable everywhere)."""
    text = json.dumps(request, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class Interaction:
    """One recorded request and the deltas the model streamed back."""

    key: str
    request: dict[str, Any]
    response: tuple[dict[str, Any], ...]


@dataclass
class Recording:
    """A list of interactions plus what the recorded provider said about itself.

    ``supports_json_schema`` is kept because it changes the request a run sends (a native
    ``response_format`` or a prompt block), so the replay must claim the same.
    """

    provider: str = "recorded"
    model: str = "recorded-model"
    supports_json_schema: bool = False
    interactions: list[Interaction] = field(default_factory=list)

    @property
    def input(self) -> list[TranscriptEntry]:
        """The recorded run's input: the first request's entries after its system head."""
        if not self.interactions:
            raise RecordingError("the recording is empty", hint="record at least one run")
        return _recorded_input(self.interactions[0])

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": _SCHEMA,
            "version": RECORDING_VERSION,
            "provider": self.provider,
            "model": self.model,
            "supports_json_schema": self.supports_json_schema,
            "interactions": [
                {"key": i.key, "request": i.request, "response": list(i.response)}
                for i in self.interactions
            ],
        }

    @classmethod
    def from_dict(cls, data: Any) -> Recording:
        """Rebuild a recording; raises ``RecordingError`` for anything malformed."""
        if not isinstance(data, dict) or data.get("schema") != _SCHEMA:
            raise RecordingError("this is not a lovia eval recording (no 'schema' marker)")
        if data.get("version") != RECORDING_VERSION:
            raise RecordingError(
                f"unsupported recording version {data.get('version')!r} "
                f"(this lovia-eval reads {RECORDING_VERSION})",
                hint="record the run again with this lovia-eval",
            )
        if not isinstance(data.get("supports_json_schema"), bool):
            raise RecordingError(
                "malformed recording: supports_json_schema must be true or false, "
                f"got {data.get('supports_json_schema')!r}",
                hint="record the run again, or restore the value lovia wrote",
            )
        try:
            interactions = [
                Interaction(str(i["key"]), dict(i["request"]), tuple(map(dict, i["response"])))
                for i in data["interactions"]
            ]
            if interactions:  # checked now, so a hand-edited input fails on load
                _recorded_input(interactions[0])
            return cls(
                provider=str(data["provider"]),
                model=str(data["model"]),
                supports_json_schema=bool(data["supports_json_schema"]),
                interactions=interactions,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise RecordingError(f"malformed recording: {type(exc).__name__}: {exc}") from exc

    def save(self, path: str | Path) -> None:
        """Write the recording as indented JSON (UTF-8)."""
        text = json.dumps(self.to_dict(), indent=2, ensure_ascii=False, sort_keys=True)
        Path(path).write_text(text + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> Recording:
        """Read a recording file; raises ``RecordingError`` naming the file."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
            return cls.from_dict(data)
        except OSError as exc:
            raise RecordingError(f"cannot read recording {str(path)!r}: {exc.strerror}") from exc
        except ValueError as exc:
            raise RecordingError(f"recording {str(path)!r} is not valid JSON: {exc}") from exc
        except RecordingError as exc:
            raise RecordingError(f"recording {str(path)!r}: {exc.message}", hint=exc.hint) from exc


def _recorded_input(first: Interaction) -> list[TranscriptEntry]:
    """The run's input from its first request: the entries after the system head."""
    raw = first.request.get("entries")
    try:
        if not isinstance(raw, list):
            raise TypeError(f"expected a list of entries, got {type(raw).__name__}")
        entries = [entry_from_dict(e) for e in raw]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise RecordingError(
            f"malformed recording: the first request's entries: {type(exc).__name__}: {exc}",
            hint="record the run again; a hand-edited request must keep the entries lovia wrote",
        ) from exc
    return entries[leading_system_count(entries) :]


# -- deltas <-> JSON ---------------------------------------------------------------------


def _deltas_to_json(deltas: Iterable[ModelDelta]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for d in deltas:
        if isinstance(d, (TextDelta, ReasoningDelta)):
            kind = "text" if isinstance(d, TextDelta) else "reasoning"
            if out and out[-1]["type"] == kind:  # coalesce: the loop only concatenates them
                out[-1]["delta"] += d.delta
            else:
                out.append({"type": kind, "delta": d.delta})
        elif isinstance(d, ToolCallDelta):
            out.append(
                {"type": "tool_call", "index": d.index, "call_id": d.call_id, "name": d.name,
                 "arguments": d.arguments}
            )  # fmt: skip
        elif isinstance(d, UsageDelta):
            out.append({"type": "usage", "usage": d.usage.to_dict()})
        elif isinstance(d, FinishDelta):
            out.append({"type": "finish", "reason": d.reason})
        else:
            out.append({"type": "entry", "entry": entry_to_dict(d.entry), "index": d.index})
    return out


def _delta_from_json(data: dict[str, Any]) -> ModelDelta:
    kind = data.get("type")
    if kind == "text":
        return TextDelta(data["delta"])
    if kind == "reasoning":
        return ReasoningDelta(data["delta"])
    if kind == "tool_call":
        return ToolCallDelta(data["index"], data["call_id"], data["name"], data["arguments"])
    if kind == "usage":
        return UsageDelta(Usage.from_dict(data["usage"]))
    if kind == "finish":
        return FinishDelta(data["reason"])
    if kind == "entry":
        return EntryCompletedDelta(entry_from_dict(data["entry"]), data["index"])
    raise RecordingError(f"unknown recorded delta type {kind!r}")


# -- the providers -----------------------------------------------------------------------


class RecordingProvider:
    """Wraps ``inner`` and appends every completed reply to ``recording``.

    A reply that fails mid-stream is not recorded (the error propagates unchanged). Call
    ``recording.save(path)`` when the runs are done.
    """

    def __init__(self, inner: Provider, recording: Recording | None = None) -> None:
        self.inner = inner
        self.name = inner.name
        self.model = inner.model
        self.supports_json_schema = inner.supports_json_schema
        self.recording = recording if recording is not None else Recording()
        self.recording.provider = inner.name
        self.recording.model = inner.model
        self.recording.supports_json_schema = inner.supports_json_schema

    async def stream(
        self,
        entries: Sequence[TranscriptEntry],
        *,
        tools: Sequence[Tool] = (),
        response_format: dict[str, Any] | None = None,
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[ModelDelta]:
        """Stream ``inner``'s reply unchanged, then record it."""
        request = canonical_request(
            entries, tools=tools, response_format=response_format, settings=settings
        )
        seen: list[ModelDelta] = []
        stream = self.inner.stream(
            entries, tools=tools, response_format=response_format, settings=settings
        )
        async for delta in stream:
            seen.append(delta)
            yield delta
        reply = tuple(_deltas_to_json(seen))
        self.recording.interactions.append(Interaction(request_key(request), request, reply))


class ReplayProvider:
    """Serves a ``Recording`` offline; a request it does not hold raises ``RecordingMissError``.

    Keeps a per-replay position, so give each run its own instance (``recorded_case`` does).
    """

    def __init__(self, recording: Recording) -> None:
        self.recording = recording
        self.name = recording.provider
        self.model = recording.model
        self.supports_json_schema = recording.supports_json_schema
        self._by_key: dict[str, list[Interaction]] = {}
        for i in recording.interactions:
            self._by_key.setdefault(i.key, []).append(i)
        self._served: dict[str, int] = {}
        self._sent = 0

    async def stream(
        self,
        entries: Sequence[TranscriptEntry],
        *,
        tools: Sequence[Tool] = (),
        response_format: dict[str, Any] | None = None,
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[ModelDelta]:
        """Replay the reply recorded for this exact request."""
        request = canonical_request(
            entries, tools=tools, response_format=response_format, settings=settings
        )
        key = request_key(request)
        index = self._sent
        self._sent += 1
        candidates = self._by_key.get(key)
        if not candidates:
            raise self._miss(index, key, request)
        served = self._served.get(key, 0)
        self._served[key] = served + 1
        for data in candidates[min(served, len(candidates) - 1)].response:
            yield _delta_from_json(data)

    def _miss(self, index: int, key: str, request: dict[str, Any]) -> RecordingMissError:
        recorded = self.recording.interactions
        if not recorded:
            diff = "(the recording is empty)"
        else:
            closest = recorded[min(index, len(recorded) - 1)].request
            diff = _diff(closest, request, f"recorded request #{min(index, len(recorded) - 1)}")
        return RecordingMissError(
            f"request #{index} of this replay (key {key[:12]}) is not in the recording; "
            f"it diverged from what was recorded:\n{diff}",
            index=index,
            key=key,
            diff=diff,
            hint="the agent, its tools or the input changed since recording; record again "
            "(RecordingProvider) or fork the case onto a live model",
        )


def _diff(recorded: dict[str, Any], sent: dict[str, Any], label: str) -> str:
    def lines(value: dict[str, Any]) -> list[str]:
        return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False).splitlines()

    diff = list(difflib.unified_diff(lines(recorded), lines(sent), label, "sent", lineterm=""))
    if len(diff) > _DIFF_LINES:
        diff = [*diff[:_DIFF_LINES], f"... ({len(diff) - _DIFF_LINES} more diff lines)"]
    return "\n".join(diff)


# -- cases from recordings ---------------------------------------------------------------


def recorded_case(
    recording: Recording | str | Path, checks: Iterable[Check] = (), **fields: Any
) -> Case:
    """A ``Case`` that replays ``recording`` (a ``Recording`` or a file path) offline.

    The input is the recorded run's input; each sample gets its own ``ReplayProvider``.
    Other ``Case`` fields pass through ``fields``.
    """
    rec = recording if isinstance(recording, Recording) else Recording.load(recording)
    if "model" in fields:
        raise UserError("recorded_case() sets model= itself", hint="use fork() to change it")
    return Case(rec.input, checks, model=lambda: ReplayProvider(rec), **fields)


def fork(
    case: Case,
    model: Provider | str,
    *,
    name: str | None = None,
    record_to: Recording | None = None,
) -> Case:
    """``case`` re-targeted at ``model``: same input and checks, a new name.

    With ``record_to``, the new model's replies are recorded there (``model`` must then be
    a ``Provider`` instance), so the fork can itself be replayed later.
    """
    label = model if isinstance(model, str) else f"{model.name}:{model.model}"
    target: Any = model
    if record_to is not None:
        if isinstance(model, str):
            raise UserError(
                "fork(record_to=...) needs a Provider instance, not a model string",
                hint="build one with lovia.providers.provider_from_string(...)",
            )
        provider = model
        target = lambda: RecordingProvider(provider, record_to)  # noqa: E731  # a per-sample factory
    return case.replace(model=target, name=name or f"{case.name} @ {label}")
