"""Workspace costs: a path decision, a read_file round trip, and bubblewrap's overhead.

Run: ``uv run python benchmarks/bench_workspace.py``

* ``decide_path``: one ``LocalWorkspaceSession.decide_path`` (resolve with symlinks
  followed, then the policy: denied paths, rules, mode defaults) on a coding policy with
  a denied pattern and the protected rules.
* ``decide_command``: one ``decide_command`` on a compound command with redirects (static
  rules + guard claims), with the parse cached (the approval predicate and the session
  judge the same command) and without.
* ``tree read``: ``decide_command("grep -r TODO .")`` on a 10,000-file tree: the walk that
  looks for a denied file beneath (all of it when there is none; it stops at a root
  ``.env`` at once), and ``BubblewrapExecutor.launch_argv``'s scan for the default secret
  files on the same tree.
* ``read_file``: the ``read_file`` tool, invoked as the run loop does, on a 200-line file
  (gate, worker-thread read with the symlink re-check, decode, page, render).
* ``run true``: the local shell vs ``BubblewrapExecutor`` for ``true``; the difference is
  the sandbox's added latency (skipped when bwrap is missing).
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from lovia.cancellation import CancelToken
from lovia.run_context import RunContext
from lovia.steering import Mailbox
from lovia.workspace import (
    BubblewrapExecutor,
    CommandRule,
    LocalWorkspaceSession,
    WorkspacePolicy,
    workspace_tools,
)
from lovia.workspace.command_guard import parse_command


def _per_call_us(fn: Callable[[], object], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n * 1e6


async def _median_ms(fn: Callable[[], Awaitable[object]], n: int) -> float:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        await fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


async def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="lovia-bench-"))
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("".join(f"line {i} = {i}\n" for i in range(200)))
    policy = WorkspacePolicy.coding(
        denied_paths=(".env*",), command_rules=(CommandRule("pytest", "allow"),)
    )
    session = LocalWorkspaceSession(root, policy=policy)
    decide = _per_call_us(lambda: session.decide_path("src/app.py"), 20_000)
    print(f"decide_path      {decide:8.1f} us")
    command = "pytest -q tests/ 2>&1 | tee out.log && cat src/app.py > /tmp/x"
    warm = _per_call_us(lambda: session.decide_command(command), 5_000)
    print(f"decide_command   {warm:8.1f} us (parse cached, as for predicate + session)")

    def cold() -> None:
        parse_command.cache_clear()
        session.decide_command(command)

    print(f"decide_command   {_per_call_us(cold, 2_000):8.1f} us (parse included)")

    await _tree_reads()

    tool = next(t for t in workspace_tools(policy) if t.name == "read_file")
    agent: Any = None  # the workspace tools never look at the agent
    ctx: RunContext[None] = RunContext(
        deps=None,
        agent=agent,
        cancel_token=CancelToken(),
        mailbox=Mailbox(),
        workspace=session,
    )
    read = await _median_ms(lambda: tool.invoke({"path": "src/app.py"}, ctx), 500)
    print(f"read_file        {read * 1e3:8.1f} us (median round trip)")

    trusted = LocalWorkspaceSession(root, policy=WorkspacePolicy.trusted())
    local = await _median_ms(lambda: trusted.run("true"), 50)
    print(f"run true local   {local:8.2f} ms")
    if shutil.which("bwrap") is None:
        print("run true bwrap   skipped (bwrap not installed)")
        return
    sandboxed = LocalWorkspaceSession(
        root, policy=WorkspacePolicy.trusted(), executor=BubblewrapExecutor()
    )
    boxed = await _median_ms(lambda: sandboxed.run("true"), 50)
    print(f"run true bwrap   {boxed:8.2f} ms (+{boxed - local:.2f} ms over the local shell)")
    shutil.rmtree(root)


def _median_sync_ms(fn: Callable[[], object], n: int) -> float:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


async def _tree_reads() -> None:
    root = Path(tempfile.mkdtemp(prefix="lovia-bench-tree-"))
    for d in range(100):
        sub = root / "pkg" / f"m{d}"
        sub.mkdir(parents=True)
        for f in range(100):
            (sub / f"f{f}.py").write_text("x = 1\n")
    session = LocalWorkspaceSession(root, policy=WorkspacePolicy.trusted())
    command = "grep -r TODO ."
    clean = _median_sync_ms(lambda: session.decide_command(command), 20)
    print(f"tree read clean  {clean:8.2f} ms (10,000 files walked, nothing denied)")
    (root / ".env").write_text("SECRET=1\n")
    found = _median_sync_ms(lambda: session.decide_command(command), 20)
    print(f"tree read .env   {found:8.2f} ms (a root .env: the walk stops at once)")
    if shutil.which("bwrap") is not None:
        bwrap = BubblewrapExecutor()
        policy = WorkspacePolicy.trusted()
        scan = _median_sync_ms(
            lambda: bwrap.launch_argv("true", cwd=str(root), policy=policy, root=root), 20
        )
        print(f"bwrap argv scan  {scan:8.2f} ms (default secrets over the same tree)")
    shutil.rmtree(root)


if __name__ == "__main__":
    asyncio.run(main())
