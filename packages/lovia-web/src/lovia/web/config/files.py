"""Where ``config.json`` lives, and reading and writing it safely.

Two scopes: the user file ``~/.lovia/config.json`` and the project file
``./.lovia/config.json``. The project file, when it exists, replaces the user file wholesale
(no merging), and is then also where writes go; otherwise the user file is read and written.
Writes are atomic (a temporary file in the same folder, then ``os.replace``) and owner-only
(0600, the folder 0700). A project's ``.lovia/`` is kept out of git.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from lovia.exceptions import UserError
from pydantic import ValidationError

from .schema import WebConfig

__all__ = [
    "ConfigFile",
    "config_error",
    "ensure_gitignored",
    "load_config",
    "project_config_path",
    "save_config",
    "user_config_path",
]

_log = logging.getLogger("lovia.web.config")
_MAX_BYTES = 1_048_576
_LEGACY = ("web.env", ".env")
_warned: set[Path] = set()

Scope = Literal["user", "project"]


def user_config_path(home: Path | None = None) -> Path:
    return (home or Path.home()) / ".lovia" / "config.json"


def project_config_path(cwd: Path | None = None) -> Path:
    return (cwd or Path.cwd()) / ".lovia" / "config.json"


@dataclass(frozen=True, slots=True)
class ConfigFile:
    """A loaded configuration, where it came from (``None``: no file yet), and where writes go."""

    config: WebConfig
    path: Path
    scope: Scope
    exists: bool


def config_error(exc: ValidationError, *, where: str | None) -> UserError:
    """A ``UserError`` naming every invalid field (``models[0].flavor: ...``)."""
    parts = []
    for err in exc.errors():
        loc = ""
        for p in err.get("loc", ()):
            loc += f"[{p}]" if isinstance(p, int) else (f".{p}" if loc else str(p))
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        parts.append(f"{loc}: {msg}" if loc else msg)
    return UserError(
        f"invalid configuration{f' in {where}' if where else ''}: " + "; ".join(parts),
        hint="fix the field named, or delete the file and configure the model again in the UI",
    )


def _read(path: Path) -> WebConfig:
    try:
        if path.stat().st_size > _MAX_BYTES:
            raise UserError(f"{path} is larger than 1 MiB", hint="it is not a lovia config file")
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{path} is not UTF-8 text", hint="delete it or fix it") from None
    except IsADirectoryError:
        raise UserError(f"{path} is a directory", hint="remove it") from None
    except PermissionError:
        raise UserError(f"cannot read {path}: permission denied", hint="check its owner") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(
            f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})",
            hint="fix the file, or delete it to configure the model again",
        ) from None
    if not isinstance(data, dict):
        raise UserError(f"{path} must hold a JSON object", hint="see docs/web-config.md")
    try:
        return WebConfig.model_validate(data)
    except ValidationError as exc:
        raise config_error(exc, where=str(path)) from None


def _warn_legacy(folder: Path) -> None:
    for name in _LEGACY:
        legacy = folder / name
        if legacy.is_file() and legacy not in _warned:
            _warned.add(legacy)
            _log.warning(
                "%s is no longer read; lovia web keeps its models in %s",
                legacy,
                folder / "config.json",
            )


def load_config(*, cwd: Path | None = None, home: Path | None = None) -> ConfigFile:
    """The project file if it exists, else the user file; an empty config if neither does.

    Raises ``UserError`` for broken JSON or an invalid schema (the message names the field).
    """
    project, user = project_config_path(cwd), user_config_path(home)
    for path in (project, user):
        _warn_legacy(path.parent)
    for path, scope in ((project, "project"), (user, "user")):
        if path.exists():
            return ConfigFile(_read(path), path, scope, exists=True)  # type: ignore[arg-type]
    return ConfigFile(WebConfig(), user, "user", exists=False)


def _sweep_temp_files(folder: Path) -> None:
    """Remove temporary files a killed writer left behind (never the config itself)."""
    for leftover in folder.glob(".config-*.tmp"):
        try:
            leftover.unlink()
        except OSError:
            pass


def save_config(config: WebConfig, path: Path) -> None:
    """Write ``config`` to ``path`` atomically, owner-only (0600)."""
    folder = path.parent
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    _sweep_temp_files(folder)
    text = json.dumps(config.dump(), indent=2, ensure_ascii=False) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=".config-", suffix=".tmp", dir=folder)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    os.chmod(path, 0o600)


def ensure_gitignored(cwd: Path | None = None) -> None:
    """Keep ``./.lovia/`` (the chats, memory and keys) out of git: a ``.lovia/.gitignore``
    ignoring everything, and a ``.lovia/`` line in the project's ``.gitignore`` in a git
    work tree."""
    root = cwd or Path.cwd()
    folder = root / ".lovia"
    folder.mkdir(mode=0o700, exist_ok=True)
    inner = folder / ".gitignore"
    if not inner.exists():
        inner.write_text("# lovia's local state (chats, memory, keys)\n*\n", encoding="utf-8")
    if not (root / ".git").exists():
        return
    ignore = root / ".gitignore"
    text = ignore.read_text(encoding="utf-8") if ignore.is_file() else ""
    lines = {line.strip() for line in text.splitlines()}
    if lines & {".lovia", ".lovia/", "/.lovia", "/.lovia/"}:
        return
    sep = "" if not text or text.endswith("\n") else "\n"
    ignore.write_text(f"{text}{sep}.lovia/\n", encoding="utf-8")
