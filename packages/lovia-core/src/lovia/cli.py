"""The ``lovia`` command: a dispatcher whose subcommands belong to the distributions that own them.

``lovia web ...`` is registered by lovia-web and ``lovia eval ...`` by lovia-eval, through the
``lovia.commands`` entry-point group: each entry point names a ``main(argv, prog) -> int``
function. Core ships only the dispatcher, so ``lovia --help`` works with lovia-core alone, and
a subcommand whose distribution is missing prints the install hint and exits 2.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from .registry import COMMANDS, entry_points_of

__all__ = ["main"]

# Subcommands lovia's own distributions provide, for the help text and the install hint.
KNOWN_COMMANDS: dict[str, tuple[str, str]] = {
    "web": ("lovia-web", "serve an agent as a chat UI and an HTTP API"),
    "eval": ("lovia-eval", "run an evaluation suite and compare it with a baseline"),
}

CommandMain = Callable[[Sequence[str], str], int]


def _usage() -> str:
    installed = entry_points_of(COMMANDS)
    names = sorted(set(KNOWN_COMMANDS) | set(installed))
    width = max(len(n) for n in names)
    lines = ["usage: lovia <command> [options]", "", "commands:"]
    for name in names:
        dist, summary = KNOWN_COMMANDS.get(name, ("", "a third-party command"))
        note = "" if name in installed else f"  (needs {dist})"
        lines.append(f"  {name.ljust(width)}  {summary}{note}")
    lines += ["", "Run `lovia <command> --help` for a command's options; `lovia --version`."]
    return "\n".join(lines)


def _version() -> str:
    from importlib.metadata import version

    return version("lovia-core")


def _missing(name: str, dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    from .exceptions import install_hint

    try:
        installed = version(dist)
    except PackageNotFoundError:
        return (
            f"lovia: `lovia {name}` needs the {dist} distribution, which is not installed.\n"
            f"To install it: {install_hint(dist)}."
        )
    return (
        f"lovia: {dist} {installed} is installed but provides no `{name}` command; "
        f"install a version that does ({install_hint(dist)})."
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``lovia`` with ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0
    if args[0] in ("-V", "--version"):
        print(f"lovia {_version()}")
        return 0
    name, rest = args[0], args[1:]
    entry = entry_points_of(COMMANDS).get(name)
    if entry is None:
        if name in KNOWN_COMMANDS:
            print(_missing(name, KNOWN_COMMANDS[name][0]), file=sys.stderr)
        else:
            print(f"lovia: unknown command {name!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    command: CommandMain = entry.load()
    return int(command(rest, f"lovia {name}") or 0)


if __name__ == "__main__":  # pragma: no cover - `python -m lovia.cli`
    raise SystemExit(main())
