"""``MCPConnection``: a live, self-healing connection to one MCP server.

The connection is a small supervisor. Each *generation* of the underlying ``mcp`` client
lives in its own owner task, which enters the client, reports ready, parks until it is told
to stop, and exits the client again: the SDK's anyio task groups are entered and left by
one task, whichever tasks send calls through it.

States: ``idle`` -> ``starting`` -> ``ready``; a connection error (the process died, the
HTTP session expired with a 404, the stream broke) moves ``ready`` -> ``reconnecting``, and a
new generation is started with backoff (by the failed call's retry, else in the background)
-> ``ready`` again, or ``failed`` when every attempt failed (the next call tries again).
``close()`` -> ``closed``, which is final and wins over a start in progress. Every change
is logged on ``lovia.plugins.mcp`` and handed to the listeners as an
``MCPServerStateChanged``.

Calls carry a deadline that really cancels them: the call's task is cancelled, the SDK
abandons the request and tells the server (``notifications/cancelled``). A start is bounded
by ``connect_timeout``, and a stdio server's stderr is captured so a failure quotes it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, Literal

from lovia.exceptions import MCPError, UserError

from .config import MCPServerConfig, MCPServerStdio

if TYPE_CHECKING:
    from types import TracebackType

    from typing_extensions import Self

__all__ = ["MCPConnection", "MCPServerStateChanged", "ServerState", "StateListener"]

_log = logging.getLogger("lovia.plugins.mcp")

ServerState = Literal["idle", "starting", "ready", "reconnecting", "failed", "closed"]

_RECONNECT_ATTEMPTS = 3
_BACKOFF_BASE_SECONDS = 0.25
_BACKOFF_MAX_SECONDS = 4.0
_MAX_PAGES = 1000
_LOST_SESSION_MESSAGES = ("Session terminated", "Server returned an error response")
_INSTALL_HINT = "pip install 'lovia-plugins[mcp]'  (or: pip install 'mcp>=2,<3')"


@dataclass(frozen=True, slots=True)
class MCPServerStateChanged:
    """One server moved from ``previous`` to ``state``; ``error`` says why when it failed."""

    server: str
    state: ServerState
    previous: ServerState
    error: str | None = None


StateListener = Callable[[MCPServerStateChanged], None]
"""Told about every state change of a connection (called on the event loop; must not block)."""


class _Generation:
    """One life of the SDK client: its owner task, readiness and stderr."""

    def __init__(self, stderr: IO[str] | None) -> None:
        self.client: Any = None
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.stop = asyncio.Event()
        self.stderr = stderr
        self.stderr_text = ""
        self.task: asyncio.Task[None] | None = None

    @property
    def alive(self) -> bool:
        return self.client is not None and not self.stop.is_set()

    def stderr_tail(self, limit: int) -> str:
        if self.stderr is None or self.stderr.closed:
            return self.stderr_text
        fd = self.stderr.fileno()
        size = os.fstat(fd).st_size
        # pread keeps the shared file offset the child process writes at.
        data = os.pread(fd, limit, max(0, size - limit))
        return data.decode("utf-8", "replace").strip()


class MCPConnection:
    """A connection to one server (see the module docstring).

    Open it with ``await conn.open()`` or ``async with conn``. Pass it to ``MCP(...)`` to
    share it across runs: a run never closes a connection it was handed. Concurrent runs
    over one connection are unsupported.
    """

    def __init__(self, server: MCPServerConfig, *, on_state: StateListener | None = None) -> None:
        self.server = server
        self._listeners: list[StateListener] = [] if on_state is None else [on_state]
        self._state: ServerState = "idle"
        self._error: str | None = None
        self._gen: _Generation | None = None
        self._lock: asyncio.Lock | None = None
        self._retired: set[asyncio.Task[None]] = set()
        self._tools: tuple[Any, ...] | None = None
        self._started = False
        self._closed = False
        self._healer: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return f"MCPConnection({self.server.label!r}, state={self._state!r})"

    # -- state ------------------------------------------------------------------------

    @property
    def state(self) -> ServerState:
        """The supervisor's current state."""
        return self._state

    @property
    def last_error(self) -> str | None:
        """Why the last start, reconnection or call failed (``None`` when none has)."""
        return self._error

    def add_listener(self, listener: StateListener) -> None:
        """Also tell ``listener`` about state changes."""
        self._listeners.append(listener)

    def remove_listener(self, listener: StateListener) -> None:
        """Stop telling ``listener`` (a no-op when it was not added)."""
        if listener in self._listeners:
            self._listeners.remove(listener)

    def _set_state(self, state: ServerState, error: str | None = None) -> None:
        previous = self._state
        if error is not None:
            self._error = error
        if state == previous:
            return
        self._state = state
        label = self.server.label
        if state in ("failed", "reconnecting") and error:
            _log.warning("mcp server %r: %s -> %s: %s", label, previous, state, error)
        else:
            _log.info("mcp server %r: %s -> %s", label, previous, state)
        event = MCPServerStateChanged(label, state, previous, error)
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:  # noqa: BLE001 - fail-open: an observer never breaks the connection
                _log.exception("mcp state listener %r raised; skipped", listener)

    # -- lifecycle --------------------------------------------------------------------

    async def open(self) -> Self:
        """Start the server (or connect to it) and fail fast with a clear ``MCPError``.

        Idempotent while open. Raises ``UserError`` when the ``mcp`` package is missing.
        """
        await self._ensure()
        return self

    async def close(self) -> None:
        """Stop the current generation and wait for it (idempotent; closed is final)."""
        self._closed = True
        self._set_state("closed")
        healer, self._healer = self._healer, None
        if healer is not None and not healer.done():
            healer.cancel()
            await asyncio.gather(healer, return_exceptions=True)
        gen, self._gen = self._gen, None
        if gen is not None:
            self._retire(gen)
        retired = list(self._retired)
        if retired:
            await asyncio.gather(*retired, return_exceptions=True)

    async def __aenter__(self) -> Self:
        return await self.open()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- tools ------------------------------------------------------------------------

    async def tools(self) -> tuple[Any, ...]:
        """The server's tools (``mcp`` ``Tool`` objects), listed once and then cached."""
        if self._tools is None:
            return await self.refresh_tools()
        return self._tools

    async def refresh_tools(self) -> tuple[Any, ...]:
        """List the server's tools again, following every page of the listing."""
        gen = await self._ensure()
        try:
            listing = await asyncio.wait_for(_list_all(gen.client), self.server.connect_timeout)
        except Exception as exc:
            raise self._call_failed(gen, exc, None) from exc
        self._tools = tuple(listing)
        return self._tools

    async def call_tool(
        self, name: str, arguments: dict[str, Any], *, timeout: float | None = None
    ) -> Any:
        """Call ``name`` and return the raw ``CallToolResult`` (``isError`` is not raised).

        ``timeout`` (default: the server's) is the call's deadline; past it the call is
        cancelled and ``MCPError`` raised. A connection error reconnects and retries once
        when ``auto_reconnect`` is set. Application errors raise ``MCPError`` unretried.
        """
        deadline = self.server.timeout if timeout is None else timeout
        attempts = 2 if self.server.auto_reconnect else 1
        for attempt in range(1, attempts + 1):
            gen = await self._ensure()
            try:
                return await asyncio.wait_for(gen.client.call_tool(name, arguments), deadline)
            except asyncio.TimeoutError as exc:
                if not isinstance(exc.__cause__, asyncio.CancelledError):
                    raise self._call_failed(gen, exc, name) from exc
                raise MCPError(
                    f"MCP tool {name!r} on server {self.server.label!r} timed out after "
                    f"{deadline:g} s; the call was cancelled",
                    tool_name=name,
                    hint="retry with a smaller request, or raise the server's timeout",
                ) from None
            except Exception as exc:
                if attempt < attempts and _is_connection_error(exc):
                    label = self.server.label
                    _log.info("mcp server %r: %r lost its connection; retrying", label, name)
                    self._lost(gen, _describe(exc))
                    continue
                raise self._call_failed(gen, exc, name) from exc
        raise AssertionError("unreachable: the loop returns or raises on its last attempt")

    def _call_failed(self, gen: _Generation, exc: BaseException, name: str | None) -> MCPError:
        label = self.server.label
        if _is_connection_error(exc):
            self._lost(gen, _describe(exc))
            return MCPError(
                f"MCP server {label!r} lost its connection: {_describe(exc)}",
                tool_name=name,
                hint="the server is being restarted; try again"
                if self.server.auto_reconnect
                else "the server is not reconnected (auto_reconnect=False)",
            )
        if name is None:
            return MCPError(
                f"MCP server {label!r} failed to list its tools: {_describe(exc)}",
                hint="the server answered tools/list with an error; check its logs",
            )
        return MCPError(
            f"MCP server {label!r} failed on tool {name!r}: {_describe(exc)}",
            tool_name=name,
            hint="check the arguments against the tool's schema",
        )

    # -- the supervisor ---------------------------------------------------------------

    async def _ensure(self) -> _Generation:
        gen = self._gen
        if gen is not None and gen.alive:
            return gen
        self._check_open()
        _require_sdk()
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:  # one (re)connect at a time; the others wait for its outcome
            gen = self._gen
            if gen is not None and gen.alive:
                return gen
            self._check_open()
            return await self._connect()

    def _check_open(self) -> None:
        if self._closed:
            raise MCPError(
                f"MCP server {self.server.label!r} is closed",
                hint="open a new connection (server.session()) or run again",
            )

    async def _connect(self) -> _Generation:
        first = not self._started
        self._started = True
        attempts = 1 if first else _RECONNECT_ATTEMPTS
        self._set_state("starting" if first else "reconnecting")
        error = ""
        for attempt in range(attempts):
            if attempt:
                await asyncio.sleep(
                    min(_BACKOFF_MAX_SECONDS, _BACKOFF_BASE_SECONDS * 2 ** (attempt - 1))
                )
            self._check_open()  # close() may have run during the backoff
            gen, error = await self._attempt()
            if gen is not None:
                self._gen = gen
                self._set_state("ready")
                return gen
            _log.debug("mcp server %r: attempt %d: %s", self.server.label, attempt + 1, error)
        self._set_state("failed", error)
        raise MCPError(
            f"MCP server {self.server.label!r} failed to start: {error}",
            hint="check the command/URL; the server's own output is quoted above"
            if isinstance(self.server, MCPServerStdio)
            else "check that the server is running and the URL is right",
        )

    async def _attempt(self) -> tuple[_Generation | None, str]:
        """Start one generation: ``(gen, "")`` when ready, else ``(None, why)``."""
        gen = self._spawn()
        try:
            done, _ = await asyncio.wait({gen.ready}, timeout=self.server.connect_timeout)
        except asyncio.CancelledError:
            await self._stop(gen)  # our caller gave up: leave no server process behind
            raise
        if done and gen.ready.exception() is None:
            if self._closed:  # close() ran while this generation was starting
                await self._stop(gen)
                self._check_open()
            return gen, ""
        if done:
            error = _describe(gen.ready.exception())  # type: ignore[arg-type]
        else:
            error = f"no answer within connect_timeout={self.server.connect_timeout:g} s"
        await self._stop(gen)
        return None, _with_stderr(error, gen.stderr_tail(self._stderr_limit()))

    async def _stop(self, gen: _Generation) -> None:
        self._retire(gen, cancel=not gen.ready.done() or gen.ready.cancelled())
        if gen.task is not None:
            await asyncio.gather(gen.task, return_exceptions=True)

    def _stderr_limit(self) -> int:
        server = self.server
        return server.stderr_tail_chars if isinstance(server, MCPServerStdio) else 0

    def _spawn(self) -> _Generation:
        stderr = (
            tempfile.TemporaryFile("w+", encoding="utf-8")  # noqa: SIM115 - closed by _own
            if isinstance(self.server, MCPServerStdio)
            else None
        )
        gen = _Generation(stderr)
        gen.task = asyncio.get_running_loop().create_task(
            self._own(gen), name=f"mcp:{self.server.label}"
        )
        return gen

    async def _own(self, gen: _Generation) -> None:
        """The owner task of one generation: enter the client, park, exit the client."""
        try:
            async with _open_client(self.server, gen.stderr) as client:
                gen.client = client
                gen.ready.set_result(None)
                await gen.stop.wait()
        except asyncio.CancelledError:
            if not gen.ready.done():
                gen.ready.cancel()
            raise
        except Exception as exc:  # noqa: BLE001 - reported through ready or the state
            if not gen.ready.done():
                gen.ready.set_exception(exc)
                gen.ready.exception()  # retrieved: the connector reads it, never "never retrieved"
            elif self._gen is gen:
                self._lost(gen, _describe(exc))
        finally:
            gen.stop.set()
            if gen.stderr is not None:
                gen.stderr_text = gen.stderr_tail(self._stderr_limit())
                gen.stderr.close()

    def _lost(self, gen: _Generation, error: str) -> None:
        """``gen`` broke: retire it, and let the next call reconnect."""
        if self._gen is not gen:
            return  # an older generation; the current one is already being replaced
        self._gen = None
        self._retire(gen)
        tail = gen.stderr_tail(self._stderr_limit())
        reason = _with_stderr(error, tail) if tail else error
        self._set_state("reconnecting" if self.server.auto_reconnect else "failed", reason)
        if self.server.auto_reconnect and (self._healer is None or self._healer.done()):
            # Heal in the background, so the next call finds the server ready.
            self._healer = asyncio.get_running_loop().create_task(self._heal())

    async def _heal(self) -> None:
        try:
            await self._ensure()
        except Exception:  # noqa: BLE001 - recorded as "failed"; the next call tries again
            _log.debug("mcp server %r: background reconnection failed", self.server.label)

    def _retire(self, gen: _Generation, *, cancel: bool = False) -> None:
        gen.stop.set()
        task = gen.task
        if task is None or task.done():
            return
        if cancel:
            task.cancel()
        self._retired.add(task)
        task.add_done_callback(self._retired.discard)


# -- the SDK boundary -------------------------------------------------------------------


def _require_sdk() -> None:
    """Raise ``UserError`` with the install command when the ``mcp`` package is missing."""
    try:
        import mcp  # noqa: F401 - the import is the check
    except ImportError as exc:
        raise UserError(
            "MCP support needs the `mcp` package, which is not installed",
            hint=_INSTALL_HINT,
        ) from exc


@asynccontextmanager
async def _open_client(server: MCPServerConfig, stderr: IO[str] | None) -> AsyncIterator[Any]:
    """An entered ``mcp.Client`` for ``server``."""
    from mcp import Client

    if isinstance(server, MCPServerStdio):
        from mcp.client.stdio import StdioServerParameters, stdio_client

        params = StdioServerParameters(
            command=server.command,
            args=list(server.args),
            env=dict(server.env) if server.env is not None else None,
            cwd=server.cwd,
        )
        async with Client(stdio_client(params, errlog=stderr)) as client:  # type: ignore[arg-type]
            yield client
        return
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    http = create_mcp_http_client(headers=dict(server.headers) if server.headers else None)
    async with http, Client(streamable_http_client(server.url, http_client=http)) as client:
        yield client


async def _list_all(client: Any) -> list[Any]:
    tools: list[Any] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(_MAX_PAGES):
        page = await client.list_tools(cursor=cursor, cache_mode="refresh")
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor or cursor in seen:  # a repeated cursor would loop forever
            break
        seen.add(cursor)
    return tools


def _members(exc: BaseException) -> tuple[BaseException, ...] | None:
    """The exceptions inside an exception group (anyio's task groups raise them), else None."""
    inner = getattr(exc, "exceptions", None)
    return tuple(inner) if isinstance(inner, (list, tuple)) else None


def _is_connection_error(exc: BaseException) -> bool:
    """Whether ``exc`` means the transport is gone (reconnect), not that the server said no."""
    members = _members(exc)
    if members is not None:
        return any(_is_connection_error(e) for e in members)
    import anyio

    if isinstance(exc, (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)):
        return True
    if isinstance(exc, (ConnectionError, EOFError)):
        return True
    from mcp.shared.exceptions import MCPError as SdkError
    from mcp_types import CONNECTION_CLOSED

    if isinstance(exc, SdkError):
        # A 404 on a known session id comes back as "Session terminated": re-initialise.
        # Some servers (server-everything among them) answer an unknown session with a bare
        # 400 instead, which the SDK reports as an HTTP-level "error response" without a
        # JSON-RPC body; that too is treated as a lost session (re-initialised once).
        return exc.code == CONNECTION_CLOSED or exc.message in _LOST_SESSION_MESSAGES
    import httpx2

    return isinstance(exc, httpx2.TransportError)


def _describe(exc: BaseException) -> str:
    members = _members(exc)
    if members is not None and len(members) == 1:
        return _describe(members[0])
    text = str(exc)
    if isinstance(exc, (UserError, MCPError)):
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _with_stderr(error: str, tail: str) -> str:
    if not tail:
        return error
    return f"{error}\n--- server stderr (tail) ---\n{tail}\n--- end of server stderr ---"
