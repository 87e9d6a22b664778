"""The command guard: lexical path claims and simple-command segments of a shell command.

``parse_command`` reads a command the way ``sh`` tokenises it (quotes, escapes, operators,
redirections, heredocs, ``$(...)`` and backticks) without running anything, and returns:

- ``segments``: the words of every simple command, split on ``&&``, ``||``, ``;``, ``|``,
  ``&``, newlines and parentheses (fd redirections such as ``2>&1`` never split), plus the
  segments found inside substitutions. Command rules judge each one.
- ``bare_words``: argument words that do not look like paths (``.env``, ``notes``); the
  session judges those that exist relative to the command's cwd, so ``cat .env`` is
  caught without treating every word as a path.
- ``claims``: the paths the command names. Redirect targets are writes; input redirects
  and path-looking arguments (``/x``, ``~/x``, ``./x``, ``a/b``, ``..``, and the value of
  ``KEY=value`` or ``--flag=value``) are reads. Skipped: fd dups, pseudo-devices such as
  ``/dev/null``, bare words, URLs, flags, heredoc bodies and words whose value is only known
  at run time (``$VAR``; ``$HOME`` is read as ``~``).

The guard is advisory and one-sided: the session merges its verdicts with the static rules,
most restrictive wins, so a missed claim falls back to the rules and a false claim can only
add restrictions. Unbalanced quotes yield no claims (``sh`` refuses to run such a command).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Literal

__all__ = ["ParsedCommand", "PathClaim", "parse_command"]


@dataclass(frozen=True, slots=True)
class PathClaim:
    """A path a command names, and whether it reads or writes it."""

    path: str
    op: Literal["read", "write"]


@dataclass(frozen=True, slots=True)
class ParsedCommand:
    """The lexical reading of a command; ``complete`` is false when quoting was unbalanced."""

    segments: tuple[tuple[str, ...], ...]
    claims: tuple[PathClaim, ...]
    complete: bool
    bare_words: tuple[str, ...] = ()


@dataclass(slots=True)
class _Word:
    text: str
    dynamic: bool  # contains an expansion whose value only exists at run time


@dataclass(frozen=True, slots=True)
class _Op:
    kind: Literal["sep", "redir"]
    text: str


_Token = _Word | _Op

_REDIRS = ("&>>", "&>", "<<<", "<<-", "<<", "<>", "<&", ">&", ">>", ">|", "<", ">")
_SEPS = ("&&", "||", "|&", ";;", "&", "|", ";", "(", ")")
_KEYWORDS = frozenset(
    {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "time", "{", "}"}
)
_PSEUDO_DEVICES = frozenset(
    {"/dev/null", "/dev/zero", "/dev/stdin", "/dev/stdout", "/dev/stderr", "/dev/tty",
     "/dev/random", "/dev/urandom", "/dev/full"}
)  # fmt: skip
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_HOME = re.compile(r"\$(HOME\b|\{HOME\})")


@functools.lru_cache(maxsize=256)  # bounded: the policy and the guard both parse each command
def parse_command(command: str) -> ParsedCommand:
    """Split ``command`` into simple-command segments and extract its path claims."""
    lexed = _lex(command)
    if lexed is None:
        return ParsedCommand((tuple(command.split()),) if command.split() else (), (), False)
    tokens, substitutions = lexed
    segments, claims, bare = _walk(tokens)
    complete = True
    for body in substitutions:
        inner = parse_command(body)
        segments += inner.segments
        claims += inner.claims
        bare += inner.bare_words
        complete = complete and inner.complete
    return ParsedCommand(tuple(segments), tuple(claims), complete, tuple(bare))


def _walk(tokens: list[_Token]) -> tuple[list[tuple[str, ...]], list[PathClaim], list[str]]:
    segments: list[tuple[str, ...]] = []
    claims: list[PathClaim] = []
    bare: list[str] = []
    words: list[str] = []
    redirect: str | None = None

    def end_segment() -> None:
        while words and words[0] in _KEYWORDS:
            words.pop(0)
        if words:
            segments.append(tuple(words))
        words.clear()

    for token in tokens:
        if isinstance(token, _Op):
            if token.kind == "sep":
                end_segment()
            else:
                redirect = token.text
            continue
        if redirect is not None:
            claim = _redirect_claim(redirect, token)
            redirect = None
            if claim is not None:
                claims.append(claim)
            continue
        words.append(token.text)
        if not token.dynamic:
            path = _argument_path(token.text)
            if path is not None:
                claims.append(PathClaim(path, "read"))
            elif token.text and not token.text.startswith("-") and "=" not in token.text:
                bare.append(token.text)
    end_segment()
    return segments, claims, bare


def _redirect_claim(op: str, target: _Word) -> PathClaim | None:
    if op in ("<<", "<<-", "<<<") or target.dynamic:
        return None  # heredoc delimiter, here-string, or a run-time value
    if op in (">&", "<&") and (target.text.isdigit() or target.text == "-"):
        return None  # fd dup or close
    if not target.text or target.text in _PSEUDO_DEVICES or target.text.startswith("/dev/fd/"):
        return None
    return PathClaim(target.text, "read" if op == "<" else "write")


def _argument_path(word: str) -> str | None:
    if _ASSIGNMENT.match(word) or (word.startswith("--") and "=" in word):
        word = word.split("=", 1)[1]
    elif word.startswith("-"):
        return None
    if not word or "://" in word or word in _PSEUDO_DEVICES or word.startswith("/dev/fd/"):
        return None
    if word.startswith(("/", "~", "./", "../")) or word == ".." or "/" in word:
        return word
    return None


class _Lexer:
    """One pass over the text; ``None`` results mean unbalanced quoting."""

    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0
        self.tokens: list[_Token] = []
        self.substitutions: list[str] = []
        self.word: list[str] | None = None
        self.dynamic = False
        self.heredocs: list[tuple[str, bool]] = []  # (delimiter, strip leading tabs)
        self.expect_delimiter: bool | None = None  # set after << / <<- (value: strip tabs)

    def flush(self) -> None:
        if self.word is None:
            return
        word = _Word("".join(self.word), self.dynamic)
        self.word, self.dynamic = None, False
        if self.expect_delimiter is not None:
            self.heredocs.append((word.text, self.expect_delimiter))
            self.expect_delimiter = None
        self.tokens.append(word)

    def add(self, text: str, *, dynamic: bool = False) -> None:
        if self.word is None:
            self.word = []
        self.word.append(text)
        self.dynamic = self.dynamic or dynamic

    def run(self) -> bool:
        s = self.s
        while self.i < len(s):
            c = s[self.i]
            if c == "\\":
                if s.startswith("\\\n", self.i):
                    self.i += 2
                    continue
                self.add(s[self.i + 1 : self.i + 2])
                self.i += 2
            elif c == "'":
                end = s.find("'", self.i + 1)
                if end < 0:
                    return False
                self.add(s[self.i + 1 : end])
                self.i = end + 1
            elif c == '"':
                if not self.double_quoted():
                    return False
            elif c == "`" or s.startswith("$(", self.i) or c == "$":
                if not self.dollar_or_backtick():
                    return False
            elif c in " \t":
                self.flush()
                self.i += 1
            elif c == "\n":
                self.flush()
                self.tokens.append(_Op("sep", "\n"))
                self.i += 1
                self.skip_heredoc_bodies()
            elif c == "#" and self.word is None:
                end = s.find("\n", self.i)
                self.i = len(s) if end < 0 else end
            elif c in "<>" or s.startswith("&>", self.i):
                self.redirection()
            elif c in ";&|()":
                self.flush()
                op = next(op for op in _SEPS if s.startswith(op, self.i))
                self.tokens.append(_Op("sep", op))
                self.i += len(op)
            else:
                self.add(c)
                self.i += 1
        self.flush()
        return True

    def double_quoted(self) -> bool:
        s = self.s
        self.i += 1
        self.add("")  # "" is an (empty) word
        while self.i < len(s):
            c = s[self.i]
            if c == '"':
                self.i += 1
                return True
            if c == "\\" and self.i + 1 < len(s):
                nxt = s[self.i + 1]
                self.add(nxt if nxt in '"\\$`\n' else c + nxt)
                self.i += 2
            elif c in "$`":
                if not self.dollar_or_backtick():
                    return False
            else:
                self.add(c)
                self.i += 1
        return False

    def dollar_or_backtick(self) -> bool:
        s = self.s
        if s[self.i] == "`":
            end = self.i + 1
            while end < len(s) and s[end] != "`":
                end += 2 if s[end] == "\\" else 1
            if end >= len(s):
                return False
            self.substitutions.append(s[self.i + 1 : end])
            self.add("`…`", dynamic=True)
            self.i = end + 1
            return True
        if s.startswith("$(", self.i):
            close = _closing_paren(s, self.i + 2)
            if close is None:
                return False
            if not s.startswith("$((", self.i):  # $((...)) is arithmetic, not a command
                self.substitutions.append(s[self.i + 2 : close])
            self.add("$(…)", dynamic=True)
            self.i = close + 1
            return True
        home = _HOME.match(s, self.i)
        if home is not None and self.word is None:
            self.add("~")
            self.i = home.end()
            return True
        self.add("$", dynamic=True)
        self.i += 1
        return True

    def redirection(self) -> None:
        s = self.s
        if self.word is not None and "".join(self.word).isdigit() and not self.dynamic:
            self.word, self.dynamic = None, False  # an IO number such as the 2 in 2>&1
        else:
            self.flush()
        op = next(op for op in _REDIRS if s.startswith(op, self.i))
        self.i += len(op)
        self.tokens.append(_Op("redir", op))
        if op in ("<<", "<<-"):
            self.expect_delimiter = op == "<<-"

    def skip_heredoc_bodies(self) -> None:
        s = self.s
        for delimiter, strip_tabs in self.heredocs:
            while self.i < len(s):
                end = s.find("\n", self.i)
                line = s[self.i : len(s) if end < 0 else end]
                self.i = len(s) if end < 0 else end + 1
                if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                    break
        self.heredocs.clear()


def _closing_paren(s: str, start: int) -> int | None:
    depth, i = 1, start
    quote: str | None = None
    while i < len(s):
        c = s[i]
        if quote is not None:
            if c == quote:
                quote = None
            elif c == "\\" and quote == '"':
                i += 1
        elif c == "\\":
            i += 1
        elif c in "'\"":
            quote = c
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return None


def _lex(text: str) -> tuple[list[_Token], list[str]] | None:
    lexer = _Lexer(text)
    if not lexer.run():
        return None
    return lexer.tokens, lexer.substitutions
