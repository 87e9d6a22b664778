"""The common set through the ``lovia`` facade: the convenience names resolve to the
installed portions, and an agent built only from them runs with the default policy."""

from __future__ import annotations

from pathlib import Path

import lovia
import lovia.context
import lovia.workspace
from lovia.context_policy import default_context_policy
from lovia.testing import ScriptedProvider, call, text


def test_the_convenience_names_are_the_portions_classes() -> None:
    assert lovia.Compaction is lovia.context.Compaction
    assert lovia.Workspace is lovia.workspace.Workspace
    assert lovia.WorkspacePolicy is lovia.workspace.WorkspacePolicy
    assert {"Compaction", "Workspace"} <= set(dir(lovia))
    first, second = default_context_policy(), default_context_policy()
    assert isinstance(first, lovia.Compaction) and first is not second  # fresh per call


async def test_an_agent_from_facade_names_only(tmp_path: Path) -> None:
    (tmp_path / "todo.txt").write_text("ship it\n")
    model = ScriptedProvider([call("read_file", {"path": "todo.txt"}), text("Ship it.")])
    agent = lovia.Agent(
        name="dev", model=model, workspace=lovia.Workspace.local(tmp_path, mode="readonly")
    )
    result = await lovia.Runner.run(
        agent, "What is on the list?", session=lovia.InMemorySession(), session_id="x"
    )
    assert result.output == "Ship it."
    (read,) = [e for e in result.entries if isinstance(e, lovia.ToolResultEntry)]
    assert "ship it" in read.output
    # readonly: no write tools and no shell offered; the recall tool comes with Compaction.
    offered = set(model.tools[0])
    assert {"read_file", "list_files", "grep_files", "recall_tool_result"} <= offered
    assert not offered & {"write_file", "edit_file", "shell"}
