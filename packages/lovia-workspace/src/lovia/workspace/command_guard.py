"""The command guard: lexical path claims and simple-command segments of a shell command.

``parse_command`` reads a command the way ``sh`` tokenises it (quotes, escapes, operators,
redirections, heredocs, ``$(...)`` and backticks) without running anything, and returns:

- ``segments``: the words of every simple command, split on ``&&``, ``||``, ``;``, ``|``,
  ``&``, newlines and parentheses (fd redirections such as ``2>&1`` never split), plus the
  segments found inside substitutions (an unquoted heredoc's too), ``sh -c '...'`` and
  ``eval`` payloads, and, when a shell reads its script from stdin (``sh <<EOF``,
  ``echo '...' | sh``) or runs one made at run time (``sh -c "$(...)"``), the heredocs,
  here-strings and literal words of the command too.
  Command rules judge each one; ``unwrapped`` also sees through
  wrappers (``env``, ``sudo``, ``xargs``, ``/usr/bin/git``) so a deny or ask rule cannot be
  dodged by one.
- ``bare_words``: argument words (and ``KEY=`` / ``--flag=`` values) that do not look
  like paths (``.env``, ``notes``, ``.e*``); the session judges those that exist relative
  to the command's cwd or a ``cd`` target (``cd_targets``; globs expanded), so ``cat .env``
  and ``cd /etc && cat shadow`` are caught without treating every word as a path. The
  part after a ``:`` (git's ``HEAD:.env``) and after a leading ``@`` (curl's ``-d @.env``)
  counts too.
- ``recursive_reads``: the operands of commands that read whole directory trees
  (``grep -r``, ``rg``, ``git grep``, ``tar``, ``cp -r``, ``find -exec``, a listing piped
  to ``xargs``...), with ``.`` for a search that defaults to its cwd; the session denies
  them when a denied file lies beneath, since the tree's contents never appear in the
  command text.
- ``dynamic_tails``: the literal end of each word with a run-time part (``$(pwd)/.env``
  -> ``/.env``), and its literal parts alone (``.e${x}nv`` -> ``.env``, what an empty
  value leaves); the session denies one that names a ``denied_paths`` entry or a secret.
- ``claims``: the paths the command names. Redirect targets are writes; input redirects
  and path-looking arguments (``/x``, ``~/x``, ``./x``, ``a/b``, ``..``, and the value of
  ``KEY=value`` or ``--flag=value``) are reads. Skipped: fd dups, pseudo-devices such as
  ``/dev/null``, bare words, URLs, flags, heredoc text and words whose value is only known
  at run time (``$VAR``). ``$HOME`` / ``${HOME}`` at the start of a word (or of a
  ``KEY=`` / ``--flag=`` value) read as ``~``, ``$PWD`` and ``$OLDPWD`` as ``.``: the
  session anchors ``.`` at the cwd and at every ``cd`` target, which are the only values
  those variables can hold during the command. A variable the command itself assigns a
  literal value (``f=.env; cat $f``) expands to that value anywhere in a word. Each word
  is also judged as brace expansion would expand it (``.{env,x}``): ``/bin/sh`` is bash
  on some systems.

The guard is advisory and one-sided: the session merges its verdicts with the static rules,
most restrictive wins, so a missed claim falls back to the rules and a false claim can only
add restrictions. Unbalanced quotes yield no claims (``sh`` refuses to run such a command).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from .errors import WorkspaceError

__all__ = ["ParsedCommand", "PathClaim", "parse_command", "unwrapped"]


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
    cd_targets: tuple[str, ...] = ()
    """Where ``cd``/``pushd`` segments move: later relative words may be anchored there."""
    recursive_reads: tuple[str, ...] = ()
    """Operands (``.`` for the cwd) that a tree-reading command reads recursively."""
    dynamic_tails: tuple[str, ...] = ()
    """The literal ends of words with a run-time part (``$(pwd)/.env`` -> ``/.env``)."""


@dataclass(slots=True)
class _Word:
    text: str
    dynamic: bool  # contains an expansion whose value only exists at run time
    tail: str = ""  # the literal text after the last run-time part
    static: str = ""  # the literal parts alone: the word if every run-time part is empty


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
# Variables whose value the session knows (see the module docstring): HOME -> ~, else .
_KNOWN_VAR = re.compile(r"\$(?:\{(HOME|PWD|OLDPWD)\}|(HOME|PWD|OLDPWD)\b)")
_VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


_MAX_NESTING = 32  # substitutions and ``sh -c`` payloads inside each other
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash"})
# Commands that run the rest of their arguments as a command, with the options of theirs
# that take a value (skipped along with it). ``unwrapped`` strips them.
_WRAPPERS: dict[str, frozenset[str]] = {
    "builtin": frozenset(),
    "command": frozenset(),
    "coproc": frozenset(),
    "doas": frozenset({"-u", "-C"}),
    "env": frozenset({"-u", "--unset", "-C", "--chdir"}),
    "exec": frozenset({"-a"}),
    "ionice": frozenset({"-c", "-n", "-p", "--class", "--classdata"}),
    "nice": frozenset({"-n", "--adjustment"}),
    "nohup": frozenset(),
    "setsid": frozenset(),
    "stdbuf": frozenset({"-i", "-o", "-e"}),
    "sudo": frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T"}),
    "time": frozenset({"-f", "-o"}),
    "timeout": frozenset({"-s", "--signal", "-k", "--kill-after"}),
    "unbuffer": frozenset(),
    "xargs": frozenset({"-a", "-d", "-E", "-e", "-I", "-L", "-l", "-n", "-P", "-s"}),
}


@functools.lru_cache(maxsize=256)  # bounded: the policy and the guard both parse each command
def parse_command(command: str) -> ParsedCommand:
    """Split ``command`` into simple-command segments and extract its path claims.

    The bodies of ``$(...)``, backticks, ``sh -c '...'`` and ``eval ...`` are read too.
    Raises ``WorkspaceError`` when they nest deeper than any real command does.
    """
    return _parse(command, 0)


def _parse(command: str, depth: int, scripted: bool = False) -> ParsedCommand:
    """``scripted``: the text is run by a shell whose script the guard cannot see whole
    (``sh -c "$(...)"``), so its literal words are read as commands too."""
    if depth > _MAX_NESTING:
        raise WorkspaceError(
            "the command nests substitutions too deeply to be checked",
            hint="split it into simpler commands",
        )
    known: dict[str, str] = {}
    for _ in range(_MAX_VARIABLE_PASSES):  # `a=.e; b=${a}nv` needs one pass per level
        lexed = _lex(command, known)
        if lexed is None:
            split = tuple(command.split())
            return ParsedCommand((split,) if split else (), (), False)
        tokens, bodies, heredocs = lexed
        walked = _walk(tokens)
        if walked.assignments == known or not walked.assignments:
            break
        known = walked.assignments
    segments, claims, bare = walked.segments, walked.claims, walked.bare
    bodies += [body for words in segments if (body := _payload(words)) is not None]
    scripted = scripted or any(_runs_unseen_script(words) for words in segments)
    if scripted:
        # `sh <<EOF`, `echo 'cat .env' | sh`, `sh -c "$(echo ...)"`: text elsewhere in the
        # command is run as a script.
        bodies += heredocs + [text for text in walked.texts if _SCRIPT_LIKE.search(text)]
    moves = [where for words in segments if (where := _cd_target(words)) is not None]
    trees = [word for words in segments for word in _tree_operands(words)]
    listed = [tree for words in segments if (tree := _listed(words)) is not None]
    if listed and any(words[0].rsplit("/", 1)[-1] == "xargs" for words in segments):
        # `find . | xargs cat`: the names arrive at run time, from the listed tree.
        trees += [word for tree in listed for word in tree]
    tails = walked.tails
    complete = True
    for body in bodies:
        inner = _parse(body, depth + 1, scripted)
        segments += inner.segments
        claims += inner.claims
        bare += inner.bare_words
        moves += inner.cd_targets
        trees += inner.recursive_reads
        tails += inner.dynamic_tails
        complete = complete and inner.complete
    return ParsedCommand(
        tuple(segments), tuple(claims), complete, tuple(bare), tuple(moves), tuple(trees),
        tuple(tails),
    )  # fmt: skip


_MAX_VARIABLE_PASSES = 4
# A literal word that reads as a command line of its own; a lone word was judged already.
_SCRIPT_LIKE = re.compile(r"[\s;&|<>()`$]")
_LISTERS = frozenset({"find", "ls", "fd", "fdfind", "tree", "locate"})


def _listed(words: tuple[str, ...]) -> list[str] | None:
    """The directories a listing segment (``find``, ``ls``, ``git ls-files``) names files
    from (``.`` for its cwd), or ``None`` for any other segment."""
    core = unwrapped(words)
    if core[:2] == ("git", "ls-files"):
        core = core[1:]
    elif not core or core[0] not in _LISTERS:
        return None
    return _operands(core) or ["."]


def _operands(words: tuple[str, ...]) -> list[str]:
    return [w for w in words[1:] if not w.startswith("-")]


def _runs_unseen_script(words: tuple[str, ...]) -> bool:
    """Whether a segment is a shell reading its commands from stdin (``sh``, ``bash -s``),
    or one (or ``eval``) running a script made at run time (``sh -c "$(...)"``)."""
    payload = _payload(words)
    if payload is not None:
        return "$(…)" in payload or "`…`" in payload
    core = unwrapped(words)
    if not core or core[0] not in _SHELLS:
        return False
    flags = [w for w in core[1:] if w.startswith("-")]
    if any(not f.startswith("--") and "c" in f[1:] for f in flags):
        return False  # -c TEXT: read as a payload
    return not _operands(core) or any(not f.startswith("--") and "s" in f[1:] for f in flags)


# Commands that read the contents of every file under their directory operands.
_TREE_READERS = frozenset({"rg", "ag", "ack", "tar", "rsync", "zip", "7z", "bsdtar"})
_GREPS = frozenset({"grep", "egrep", "fgrep", "zgrep", "rgrep"})
_RECURSIVE_FLAG_COMMANDS = frozenset({"cp", "scp", "diff"})  # tree readers with -r/-R/-a
_PATTERN_FIRST = frozenset({"rg", "ag", "ack", "git"}) | _GREPS  # search the cwd by default
_FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})


def _tree_operands(words: tuple[str, ...]) -> list[str]:
    """The words a tree-reading segment reads recursively (``.`` when it searches its cwd)."""
    core = unwrapped(words)
    if not core:
        return []
    name, args = core[0], list(core[1:])
    if name == "git":
        i = 0
        while i < len(args) and args[i].startswith("-"):
            i += 2 if args[i] in ("-C", "-c") else 1  # global options before the subcommand
        if args[i : i + 1] != ["grep"]:
            return []
        args = args[i + 1 :]
    flags = [w for w in args if w.startswith("-")]
    operands = [w for w in args if not w.startswith("-")]
    if name in _GREPS:
        short = "".join(f[1:] for f in flags if not f.startswith("--"))
        recursive = "r" in short or "R" in short or name == "rgrep"
        recursive = recursive or any(
            f.startswith(("--recursive", "--dereference-recursive", "--directories=recurse"))
            for f in flags
        )
        if any(  # -d recurse, --directories recurse: -r spelled out
            value == "recurse" and (flag == "--directories" or _short_flag_ending(flag, "d"))
            for flag, value in zip(args, args[1:], strict=False)
        ):
            recursive = True
            operands.remove("recurse")  # the option's value, not the pattern or a path
        if not recursive:
            return []
    elif name in _RECURSIVE_FLAG_COMMANDS:
        short = "".join(f[1:] for f in flags if not f.startswith("--"))
        if not (set(short) & set("rRa") or {"--recursive", "--archive"} & set(flags)):
            return []
    elif name == "find":
        if not _FIND_EXEC & set(args):
            return []
        starts = args[: next(i for i, w in enumerate(args) if w.startswith("-"))]
        return starts or ["."]
    elif name not in _TREE_READERS and name != "git":
        return []
    if name in _PATTERN_FIRST and len(operands) <= 1:
        operands.append(".")  # no path operand: the search reads its cwd
    return operands


def _short_flag_ending(word: str, letter: str) -> bool:
    """Whether ``word`` is a cluster of short options whose last one is ``letter``."""
    return word.startswith("-") and not word.startswith("--") and word.endswith(letter)


def _cd_target(words: tuple[str, ...]) -> str | None:
    """The directory a ``cd``/``pushd`` segment moves to (``None`` if unknown until run)."""
    if words[0] not in ("cd", "pushd"):
        return None
    args = [w for w in words[1:] if not w.startswith("-")]
    if not args or "$" in args[0] or "`" in args[0]:
        return None
    return args[0]


def unwrapped(words: tuple[str, ...]) -> tuple[str, ...]:
    """The command a segment really runs: leading ``KEY=value`` assignments, wrappers
    (``env``, ``sudo``, ``nice``, ``xargs``, ``timeout 5``...) and a directory prefix on
    the binary (``/usr/bin/git`` -> ``git``) stripped. Used to add restrictions only."""
    rest = list(words)
    while rest:  # every pass drops at least the wrapper's own word
        while rest and _ASSIGNMENT.match(rest[0]):
            rest.pop(0)
        if not rest:
            break
        name = rest[0].rsplit("/", 1)[-1]
        rest[0] = name or rest[0]
        takes_value = _WRAPPERS.get(name)
        if takes_value is None:
            break
        i, split = 1, []
        while i < len(rest) and rest[i].startswith("-") and rest[i] != "-":
            if rest[i] == "--":
                i += 1
                break
            if name == "env" and rest[i] in ("-S", "--split-string") and i + 1 < len(rest):
                split = rest[i + 1].split()  # env -S 'cmd args': one word, split by env
            i += 2 if rest[i] in takes_value or split else 1
            if split:
                break
        if name == "timeout" and i < len(rest):
            i += 1  # the duration
        rest = split + rest[i:]
    return tuple(rest)


def _payload(words: tuple[str, ...]) -> str | None:
    """The command text that ``sh -c TEXT`` or ``eval ARGS`` runs, if ``words`` is one."""
    core = unwrapped(words)
    if not core:
        return None
    if core[0] == "eval":
        return " ".join(core[1:]) or None
    if core[0] not in _SHELLS:
        return None
    for i, word in enumerate(core[1:], start=1):
        if word.startswith("--"):
            continue  # --norc, --login...
        if not word.startswith("-"):
            return None  # a script file, not a command string
        if "c" in word[1:]:  # -c, -ec, -lc...
            return core[i + 1] if i + 1 < len(core) else None
    return None


@dataclass(slots=True)
class _Walked:
    segments: list[tuple[str, ...]]
    claims: list[PathClaim]
    bare: list[str]
    tails: list[str]
    assignments: dict[str, str]  # NAME=value words with a literal value
    texts: list[str]  # literal words and here-strings: commands, if a shell reads stdin


def _walk(tokens: list[_Token]) -> _Walked:
    out = _Walked([], [], [], [], {}, [])
    words: list[str] = []
    redirect: str | None = None

    def end_segment() -> None:
        while words and words[0] in _KEYWORDS:
            words.pop(0)
        if words:
            out.segments.append(tuple(words))
        words.clear()

    for token in tokens:
        if isinstance(token, _Op):
            if token.kind == "sep":
                # ``<(cmd)`` / ``>(cmd)``: the redirect has no word target; the
                # parenthesised command is a segment of its own.
                redirect = None
                end_segment()
            else:
                redirect = token.text
            continue
        if redirect is not None:
            claim = _redirect_claim(redirect, token)
            if redirect == "<<<" and not token.dynamic:
                out.texts.append(token.text)
            redirect = None
            if claim is not None:
                out.claims.append(claim)
            continue
        words.append(token.text)
        if token.dynamic:
            # `$(pwd)/.env` ends in a secret whatever the prefix; `.e${x}nv` is one when
            # the run-time part is empty.
            out.tails += [text for text in {token.tail, token.static} if text]
            continue
        out.texts.append(token.text)
        if _ASSIGNMENT.match(token.text):
            name, assigned = token.text.split("=", 1)
            out.assignments[name] = assigned
        for text in _braces(token.text):
            path = _argument_path(text)
            if path is not None:
                out.claims.append(PathClaim(path, "read"))
                continue
            value = _bare_value(text)
            if value:
                out.bare.append(value)
                if ":" in value:  # git's REV:path (`git show HEAD:.env`), scp's host:path
                    out.bare.append(value.split(":", 1)[1])
                if value.startswith("@"):  # curl's -d @file, -F name=@file
                    out.bare.append(value[1:])
    end_segment()
    return out


_MAX_BRACE_WORDS = 64


def _braces(word: str) -> list[str]:
    """The word and what brace expansion makes of it (``.{env,x}`` -> ``.env``, ``.x``):
    ``/bin/sh`` is bash on some systems, and bash expands braces even as ``sh``."""
    found = [word]
    pending = [word]
    while pending and len(found) < _MAX_BRACE_WORDS:
        text = pending.pop()
        start = text.find("{")
        end = text.find("}", start + 1)
        inner = text[start + 1 : end]
        if start < 0 or end < 0 or "," not in inner or "{" in inner:
            continue
        for choice in inner.split(","):
            expanded = text[:start] + choice + text[end + 1 :]
            found.append(expanded)
            pending.append(expanded)
    return found[:_MAX_BRACE_WORDS]


def _redirect_claim(op: str, target: _Word) -> PathClaim | None:
    if op in ("<<", "<<-", "<<<") or target.dynamic:
        return None  # heredoc delimiter, here-string, or a run-time value
    if op in (">&", "<&") and (target.text.isdigit() or target.text == "-"):
        return None  # fd dup or close
    if not target.text or target.text in _PSEUDO_DEVICES or target.text.startswith("/dev/fd/"):
        return None
    return PathClaim(target.text, "read" if op == "<" else "write")


def _bare_value(word: str) -> str | None:
    """The word (or its ``KEY=`` / ``--flag=`` value) when it may name a file."""
    if _ASSIGNMENT.match(word) or (word.startswith("--") and "=" in word):
        word = word.split("=", 1)[1]
    elif word.startswith("-"):
        return None
    return word or None


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

    def __init__(self, text: str, known: Mapping[str, str]) -> None:
        self.s = text
        self.known = known  # literal NAME=value assignments seen in the command
        self.tail: list[str] = []
        self.static: list[str] = []
        self.heredoc_texts: list[str] = []
        self.i = 0
        self.tokens: list[_Token] = []
        self.substitutions: list[str] = []
        self.word: list[str] | None = None
        self.dynamic = False
        # (delimiter, strip leading tabs, body expands $(...) because nothing was quoted)
        self.heredocs: list[tuple[str, bool, bool]] = []
        self.expect_delimiter: bool | None = None  # set after << / <<- (value: strip tabs)
        self.quoted = False  # the current word has a quote or an escape in it

    def flush(self) -> None:
        if self.word is None:
            return
        word = _Word("".join(self.word), self.dynamic, "".join(self.tail), "".join(self.static))
        self.tail, self.static = [], []
        quoted, self.quoted = self.quoted, False
        self.word, self.dynamic = None, False
        if self.expect_delimiter is not None:
            self.heredocs.append((word.text, self.expect_delimiter, not quoted))
            self.expect_delimiter = None
        self.tokens.append(word)

    def add(self, text: str, *, dynamic: bool = False) -> None:
        if self.word is None:
            self.word = []
        self.word.append(text)
        self.dynamic = self.dynamic or dynamic
        if dynamic:
            self.tail = []
        else:
            self.tail.append(text)
            self.static.append(text)

    def run(self) -> bool:
        s = self.s
        while self.i < len(s):
            c = s[self.i]
            if c == "\\":
                if s.startswith("\\\n", self.i):
                    self.i += 2
                    continue
                self.add(s[self.i + 1 : self.i + 2])
                self.quoted = True
                self.i += 2
            elif c == "'":
                end = s.find("'", self.i + 1)
                if end < 0:
                    return False
                self.add(s[self.i + 1 : end])
                self.quoted = True
                self.i = end + 1
            elif c == '"':
                self.quoted = True
                if not self.double_quoted():
                    return False
            elif s.startswith("$'", self.i):
                if not self.ansi_c_quoted():
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
        known = _KNOWN_VAR.match(s, self.i)
        if known is not None and self.at_value_start():
            self.add("~" if "HOME" in known.group(0) else ".")
            self.i = known.end()
            return True
        variable = _VARIABLE.match(s, self.i)
        name = (variable.group(1) or variable.group(2)) if variable is not None else ""
        if variable is not None and name in self.known:
            self.add(self.known[name])
            self.i = variable.end()
            return True
        # A run-time value: the whole expansion is one dynamic part, so the literal text
        # around it (the word's tail and static text) is exactly what the shell adds.
        end = variable.end() if variable is not None else self.i + 1
        default = None
        if variable is None and s.startswith("${", self.i):
            close = s.find("}", self.i + 2)
            end = close + 1 if close > 0 else end
            default = _expansion_word(s[self.i + 2 : close]) if close > 0 else None
        elif variable is None and s[self.i + 1 : self.i + 2] in tuple("@*#?$!-0123456789"):
            end = self.i + 2
        self.add(s[self.i : end], dynamic=True)
        if default is not None:
            self.static.append(default)  # what ${x:-word} and kin give when x is unset
        self.i = end
        return True

    def ansi_c_quoted(self) -> bool:
        """bash's ``$'...'`` with its escapes decoded. dash reads a ``$`` and a quoted
        string instead, but ``/bin/sh`` is bash on some systems, where ``$'\\x2eenv'`` is
        ``.env``."""
        s = self.s
        end = self.i + 2
        while end < len(s) and s[end] != "'":
            end += 2 if s[end] == "\\" else 1
        if end >= len(s):
            return False
        self.add(_ANSI_C_ESCAPE.sub(_ansi_c_char, s[self.i + 2 : end]))
        self.quoted = True
        self.i = end + 1
        return True

    def at_value_start(self) -> bool:
        """Whether nothing but quotes (or a ``KEY=`` / ``--flag=`` prefix) precedes here in
        the current word: where the shell's value of a variable starts a path."""
        if self.word is None:
            return True
        text = "".join(self.word)
        return not self.dynamic and (text == "" or text.endswith("="))

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
        """Skip the bodies of pending heredocs; an unquoted delimiter means the shell runs
        the ``$(...)`` and backticks in its body, so those are read as substitutions."""
        s = self.s
        for delimiter, strip_tabs, expands in self.heredocs:
            body: list[str] = []
            while self.i < len(s):
                end = s.find("\n", self.i)
                line = s[self.i : len(s) if end < 0 else end]
                self.i = len(s) if end < 0 else end + 1
                if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                    break
                body.append(line)
                if expands:
                    self.substitutions += _substitutions(line)
            self.heredoc_texts.append("\n".join(body))
        self.heredocs.clear()


_EXPANSION_DEFAULT = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-]):?[-=+](.*)$", re.S)
_ANSI_C_ESCAPE = re.compile(
    r"\\(x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8}|[0-7]{1,3}|c.|.)", re.S
)
_ANSI_C_SIMPLE = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "e": "\x1b",
                  "E": "\x1b", "f": "\f", "v": "\v", "\\": "\\", "'": "'", '"': '"',
                  "?": "?"}  # fmt: skip


def _expansion_word(inner: str) -> str | None:
    """The literal word of ``${name:-word}``, ``${name=word}``, ``${name:+word}`` and kin
    (quotes removed), which the shell substitutes for an unset or empty ``name``; ``None``
    for other expansions and for a word that itself expands."""
    match = _EXPANSION_DEFAULT.match(inner)
    if match is None or any(c in match.group(1) for c in "$`\\"):
        return None
    return match.group(1).replace("'", "").replace('"', "")


def _ansi_c_char(match: re.Match[str]) -> str:
    code = match.group(1)
    if code[0] in "xuU" and len(code) > 1:
        value = int(code[1:], 16)
        return chr(value) if value <= 0x10FFFF else ""
    if code[0] in "01234567":
        return chr(int(code, 8) & 0xFF)
    if code[0] == "c" and len(code) == 2:
        return chr(ord(code[1]) & 0x1F)
    return _ANSI_C_SIMPLE.get(code, "\\" + code)  # bash keeps an unknown escape as is


def _substitutions(text: str) -> list[str]:
    """The ``$(...)`` and backtick bodies in text the shell expands but does not split."""
    found: list[str] = []
    i = 0
    while i < len(text):
        if text.startswith("$(", i):
            close = _closing_paren(text, i + 2)
            if close is None:
                break
            if not text.startswith("$((", i):
                found.append(text[i + 2 : close])
            i = close + 1
        elif text[i] == "`":
            end = text.find("`", i + 1)
            if end < 0:
                break
            found.append(text[i + 1 : end])
            i = end + 1
        else:
            i += 2 if text[i] == "\\" else 1
    return found


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


def _lex(text: str, known: Mapping[str, str]) -> tuple[list[_Token], list[str], list[str]] | None:
    """Tokens, substitution bodies and heredoc bodies; ``None`` for unbalanced quoting."""
    lexer = _Lexer(text, known)
    if not lexer.run():
        return None
    return lexer.tokens, lexer.substitutions, lexer.heredoc_texts
