"""``enable_logging``: one call to see what lovia is doing.

lovia logs narrative events (``run.start``, ``model.done: turn= tokens=``, ``tool.start``,
``tool.error``, ``run.handoff``, ``context.overflow``, ``run.done``) on the ``lovia`` logger
tree, which carries only a ``NullHandler`` until an application configures logging. This
helper attaches one stream handler to the ``lovia`` logger. Calling it again replaces that
handler instead of adding a second one, and it never touches the root logger.

Colour is used only when the stream is a terminal, and never when ``NO_COLOR`` is set
(non-empty) or ``TERM=dumb``; ``color=True``/``False`` overrides the detection.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import IO

__all__ = ["enable_logging"]

_DEFAULT_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"
_DEFAULT_DATEFMT = "%H:%M:%S"

_LEVEL_COLORS = {
    logging.DEBUG: "\x1b[2m",  # dim
    logging.INFO: "\x1b[36m",  # cyan
    logging.WARNING: "\x1b[33m",  # yellow
    logging.ERROR: "\x1b[31m",  # red
    logging.CRITICAL: "\x1b[1;31m",  # bold red
}
_RESET = "\x1b[0m"


class _LoviaHandler(logging.StreamHandler):  # type: ignore[type-arg]  # generic only in stubs
    """The handler ``enable_logging`` owns; its class marks it for replacement."""


class _ColorFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        color = _LEVEL_COLORS.get(record.levelno)
        return f"{color}{text}{_RESET}" if color else text


def enable_logging(
    level: int | str = "INFO",
    *,
    format: str | None = None,
    datefmt: str | None = None,
    stream: IO[str] | None = None,
    color: bool | None = None,
    propagate: bool = False,
) -> logging.Handler:
    """Send the ``lovia`` logger's records at ``level`` and above to ``stream``.

    ``format``/``datefmt`` default to a compact timestamped line; ``stream`` defaults to
    ``sys.stderr``; ``color=None`` detects (terminal, no ``NO_COLOR``, ``TERM`` not
    ``dumb``). ``propagate=False`` keeps records away from the root logger's handlers.
    Returns the installed handler. Raises ``ValueError`` for an unknown level name.
    """
    resolved = _resolve_level(level)  # before any change: a bad level leaves logging as it was
    target = stream if stream is not None else sys.stderr
    use_color = _should_color(target) if color is None else color
    if use_color:
        _enable_windows_vt()
    formatter_cls = _ColorFormatter if use_color else logging.Formatter
    handler = _LoviaHandler(target)
    handler.setFormatter(formatter_cls(format or _DEFAULT_FORMAT, datefmt or _DEFAULT_DATEFMT))

    logger = logging.getLogger("lovia")
    for old in [h for h in logger.handlers if isinstance(h, _LoviaHandler)]:
        logger.removeHandler(old)
    logger.addHandler(handler)
    logger.setLevel(resolved)
    logger.propagate = propagate
    return handler


def _resolve_level(level: int | str) -> int:
    if isinstance(level, int):
        return level
    value = logging.getLevelName(level.upper())
    if not isinstance(value, int):
        raise ValueError(f"unknown logging level {level!r}; use DEBUG, INFO, WARNING or ERROR")
    return value


def _should_color(stream: IO[str]) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty is not None and isatty())


def _enable_windows_vt() -> None:
    """Turn on ANSI escape processing in a Windows console (no-op elsewhere)."""
    # Windows-only: other platforms' terminals understand ANSI escapes already.
    if sys.platform == "win32":  # pragma: no cover
        import ctypes

        kernel32 = ctypes.windll.kernel32
        enable_vt_processing = 0x0004
        for std_handle in (-11, -12):  # STD_OUTPUT_HANDLE, STD_ERROR_HANDLE
            handle = kernel32.GetStdHandle(std_handle)
            mode = ctypes.c_uint32()
            if kernel32.GetConsoleMode(handle, ctypes.byref(mode)):
                kernel32.SetConsoleMode(handle, mode.value | enable_vt_processing)
