"""The command guard (lexical path claims) and path resolution."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from lovia.workspace.command_guard import PathClaim, parse_command
from lovia.workspace.paths import is_proc_magic, resolve_path


def claims(command: str) -> list[tuple[str, str]]:
    return [(c.path, c.op) for c in parse_command(command).claims]


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("echo hi > out.txt", [("out.txt", "write")]),
        ("echo hi >>/var/log/x", [("/var/log/x", "write")]),
        ("cmd 2> err.log", [("err.log", "write")]),
        ("cmd &> all.log", [("all.log", "write")]),
        ("cmd >| forced", [("forced", "write")]),
        ("wc -l < /etc/passwd", [("/etc/passwd", "read")]),
        ("cat /etc/hosts ./a", [("/etc/hosts", "read"), ("./a", "read")]),
        ("cat ~/.ssh/id_rsa", [("~/.ssh/id_rsa", "read")]),
        ("cat $HOME/.netrc", [("~/.netrc", "read")]),
        ("ls ..", [("..", "read")]),
        ("cat 'my dir/file'", [("my dir/file", "read")]),
        ('cat "/etc/x y"', [("/etc/x y", "read")]),
        ("CONFIG=/etc/app.conf run", [("/etc/app.conf", "read")]),
        ("tool --out=/tmp/o", [("/tmp/o", "read")]),
        ("echo $(cat /etc/shadow)", [("/etc/shadow", "read")]),
        ("echo `cat /etc/shadow`", [("/etc/shadow", "read")]),
        ('echo "$(cat /etc/shadow)" > o', [("o", "write"), ("/etc/shadow", "read")]),
    ],
)
def test_claims(command: str, expected: list[tuple[str, str]]) -> None:
    assert claims(command) == expected


@pytest.mark.parametrize(
    "command",
    [
        "cmd 2>&1",
        "cmd >&2",
        "cmd 3<&-",
        "cmd > /dev/null",
        "cat /dev/stdin",
        "echo hello world",
        "curl https://example.com/a/b",
        "ls -la --color",
        "cat <<EOF\n/etc/shadow\nEOF",
        "cat <<-'END'\n\t/etc/shadow\n\tEND",
        "grep x <<< /etc/shadow",
        "cat $DIR/file",
        "echo 'unbalanced",
        "# cat /etc/shadow",
    ],
)
def test_no_claims(command: str) -> None:
    assert claims(command) == []


def test_heredoc_body_is_skipped_but_the_next_line_is_read() -> None:
    assert claims("cat <<EOF > out\n/etc/shadow\nEOF\ncat /etc/hosts") == [
        ("out", "write"),
        ("/etc/hosts", "read"),
    ]


def test_segments_split_on_operators_and_skip_keywords_and_redirects() -> None:
    parsed = parse_command("FOO=1 make -j2 2>&1 | tee log && while true; do rm -f x; done")
    assert parsed.segments == (
        ("FOO=1", "make", "-j2"),
        ("tee", "log"),
        ("true",),
        ("rm", "-f", "x"),
    )
    assert parsed.complete


def test_unbalanced_quotes_yield_no_claims_but_keep_words() -> None:
    parsed = parse_command('cat "/etc/shadow')
    assert (parsed.claims, parsed.complete) == ((), False)
    assert parsed.segments == (("cat", '"/etc/shadow'),)


def test_claim_type_is_a_value() -> None:
    assert parse_command("cat /x").claims == (PathClaim("/x", "read"),)


def test_resolve_relative_home_and_escape(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "root"
    (root / "src").mkdir(parents=True)
    assert resolve_path("src/a.py", root).rel == "src/a.py"
    assert resolve_path(".", root).rel == "."
    escaped = resolve_path("src/../../outside", root)
    assert (escaped.rel, escaped.path) == (None, tmp_path / "outside")
    monkeypatch.setenv("HOME", str(root))
    assert resolve_path("~/src", root).rel == "src"
    assert resolve_path("a.py", root, base=root / "src").rel == "src/a.py"


def test_resolve_follows_symlinks_both_ways(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "secret").write_text("s")
    (root / "link").symlink_to(tmp_path / "secret")
    (root / "inner").symlink_to(root / "real", target_is_directory=True)
    assert resolve_path("link", root) == resolve_path(tmp_path / "secret", root)
    assert resolve_path("link", root).rel is None
    assert resolve_path("inner/x", root).rel == "real/x"  # missing tail resolves lexically


def test_proc_magic_paths() -> None:
    assert is_proc_magic(Path("/proc/self/environ"))
    assert is_proc_magic(Path(f"/proc/{os.getpid()}/fd/3"))
    assert is_proc_magic(Path("/proc/thread-self"))
    assert not is_proc_magic(Path("/proc/cpuinfo"))
    assert not is_proc_magic(Path("/processes/self"))
