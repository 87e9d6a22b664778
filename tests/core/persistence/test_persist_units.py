"""The checkpoint/resume building blocks on their own (runtime/checkpoint.py, runtime/resume.py).

These pin the pieces the run loop composes; ``test_persist_run.py`` drives the same
behaviour through ``Runner``. Stores are the real in-memory and SQLite ones.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from lovia import Agent
from lovia.checkpointer import CheckpointOptions, RunHead, RunSnapshot
from lovia.exceptions import (
    BudgetExceeded,
    ContextOverflowError,
    GuardrailTripped,
    MaxTurnsExceeded,
    OutputValidationError,
    ProviderError,
    RunCancelled,
    StoreError,
    UserError,
)
from lovia.handoff import Handoff
from lovia.runtime.checkpoint import classify_failure
from lovia.runtime.resume import (
    open_checkpoint,
    plan_resume,
    rehydrate_output,
    resolve_resume_agent,
    restored_entries,
)
from lovia.stores import InMemoryCheckpointer, SQLiteCheckpointer
from lovia.transcript import (
    AssistantTextEntry,
    InputEntry,
    ReasoningEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
)
from pydantic import BaseModel

# -- status classification ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (ProviderError("503", retryable=True), "interrupted"),
        (BudgetExceeded("tokens", limit="max_total_tokens"), "interrupted"),
        (RunCancelled(reason="user"), "interrupted"),
        (StoreError("disk full"), "interrupted"),
        (ProviderError("401", retryable=False), "failed"),
        (ContextOverflowError("too long"), "failed"),
        (MaxTurnsExceeded("loop"), "failed"),
        (GuardrailTripped(reason="no"), "failed"),
        (ValueError("bug in a hook"), "failed"),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else v,
)
def test_failures_are_classified_resumable_or_final(error: BaseException, status: str) -> None:
    assert classify_failure(error)[0] == status


def test_the_error_payload_names_the_type_message_and_hint() -> None:
    _, payload = classify_failure(MaxTurnsExceeded("ran out", hint="raise max_turns="))
    assert payload == {"type": "MaxTurnsExceeded", "message": "ran out", "hint": "raise max_turns="}
    assert classify_failure(KeyError("k"))[1] == {"type": "KeyError", "message": "'k'"}


# -- the handoff graph --------------------------------------------------------------------


def _graph() -> tuple[Agent[Any], Agent[Any], Agent[Any]]:
    c = Agent("c")
    b = Agent("b", handoffs=[Handoff(c, name="to_c")])
    a = Agent("a", handoffs=[b])
    # A cycle back to the entry agent must not loop forever.
    c.handoffs = (a,)
    return a, b, c


def test_the_active_agent_is_found_transitively_through_handoffs() -> None:
    a, b, c = _graph()
    assert resolve_resume_agent(a, "a") is a
    assert resolve_resume_agent(a, "b") is b
    assert resolve_resume_agent(a, "c") is c


def test_an_unreachable_agent_resolves_to_none_even_with_a_cycle() -> None:
    a, b, _ = _graph()
    assert resolve_resume_agent(a, "renamed") is None
    assert resolve_resume_agent(Agent("alone"), "b") is None


# -- planning the interrupted turn --------------------------------------------------------


def test_dangling_calls_are_the_ones_without_results_in_request_order() -> None:
    entries: list[TranscriptEntry] = [
        InputEntry("user", "go"),
        ToolCallEntry("a", "t", "{}"),
        ToolCallEntry("b", "t", "{}"),
        ToolCallEntry("c", "t", "{}"),
        ToolResultEntry("b", "done"),
    ]
    assert plan_resume(entries, {}).pending == (1, 3)


def test_duplicate_call_ids_pair_by_occurrence() -> None:
    entries: list[TranscriptEntry] = [
        ToolCallEntry("x", "t", "{}"),
        ToolCallEntry("x", "t", "{}"),
        ToolResultEntry("x", "first"),
    ]
    assert plan_resume(entries, {}).pending == (1,)


def test_a_stored_final_reply_is_settled_instead_of_calling_the_model() -> None:
    entries: list[TranscriptEntry] = [
        InputEntry("user", "go"),
        ToolCallEntry("a", "t", "{}"),
        ToolResultEntry("a", "r"),
        ReasoningEntry("thinking"),
        AssistantTextEntry("final"),
    ]
    plan = plan_resume(entries, {})
    assert plan.pending == ()
    assert plan.final_reply == (ReasoningEntry("thinking"), AssistantTextEntry("final"))


@pytest.mark.parametrize(
    "last",
    [InputEntry("user", "injected"), ToolResultEntry("a", "r")],
    ids=["ends-with-input", "ends-with-result"],
)
def test_nothing_to_settle_when_the_model_must_answer_next(last: TranscriptEntry) -> None:
    entries: list[TranscriptEntry] = [ToolCallEntry("a", "t", "{}"), ToolResultEntry("a", "r")]
    if isinstance(last, InputEntry):
        entries.append(last)
    plan = plan_resume(entries, {})
    assert plan == type(plan)()


def test_an_accepted_but_unapplied_handoff_is_planned() -> None:
    target = Agent("billing")
    handoff = Handoff(target)
    entries: list[TranscriptEntry] = [
        ToolCallEntry("n", "note", "{}"),
        ToolCallEntry("h1", "transfer_to_billing", "{}"),
        ToolCallEntry("h2", "transfer_to_billing", "{}"),
        ToolResultEntry("h2", "Tool error: only the first handoff", is_error=True),
        ToolResultEntry("h1", "Transferred to billing."),
    ]
    plan = plan_resume(entries, {"transfer_to_billing": handoff})
    assert plan.handoff is handoff
    assert plan.pending == (0,)


def test_a_failed_handoff_result_is_not_applied() -> None:
    entries: list[TranscriptEntry] = [
        ToolCallEntry("h", "transfer_to_billing", "{}"),
        ToolResultEntry("h", "Tool error: handoff failed", is_error=True),
    ]
    assert plan_resume(entries, {"transfer_to_billing": Handoff(Agent("billing"))}).handoff is None


def test_malformed_arguments_of_answered_calls_are_normalised() -> None:
    head = RunHead(agent_name="a")
    snapshot = RunSnapshot(
        "r",
        (
            ToolCallEntry("bad", "t", '{"x": '),
            ToolResultEntry("bad", "Tool error: not JSON", is_error=True),
            ToolCallEntry("ok", "t", '{"x": 1}'),
            ToolResultEntry("ok", "1"),
            ToolCallEntry("later", "t", "[1]"),  # dangling: its resume re-validates it
        ),
        head,
    )
    out = restored_entries(snapshot)
    assert out[0] == ToolCallEntry("bad", "t", "{}")
    assert out[2:] == list(snapshot.entries[2:])


# -- output rehydration -------------------------------------------------------------------


class Verdict(BaseModel):
    ok: bool
    score: int


@pytest.mark.parametrize(
    ("stored", "output_type", "expected"),
    [
        ("plain text", str, "plain text"),
        ({"ok": True, "score": 3}, Verdict, Verdict(ok=True, score=3)),
        ([1, 2], list[int], [1, 2]),
        (7, int, 7),
    ],
    ids=["text", "model", "list", "int"],
)
def test_stored_output_is_rebuilt_as_the_output_type(
    stored: Any, output_type: Any, expected: Any
) -> None:
    assert rehydrate_output(stored, output_type) == expected


def test_a_stored_output_that_no_longer_fits_raises_with_a_hint() -> None:
    with pytest.raises(OutputValidationError) as info:
        rehydrate_output({"ok": "maybe"}, Verdict, run_id="r1")
    assert "'r1'" in info.value.message
    assert info.value.hint is not None and "restart" in info.value.hint


# -- the if_run_exists policy table -------------------------------------------------------


async def _stored(status: str) -> tuple[InMemoryCheckpointer, RunSnapshot]:
    store = InMemoryCheckpointer()
    head = RunHead(agent_name="a", turns=2, status=status)  # type: ignore[arg-type]  # parametrised
    await store.append("r", [InputEntry("user", "go"), AssistantTextEntry("hi")], head)
    snapshot = await store.load("r")
    assert snapshot is not None
    return store, snapshot


@pytest.mark.parametrize("status", ["running", "interrupted", "completed"])
@pytest.mark.parametrize("policy", ["resume", "resume_only"])
async def test_resume_policies_pick_up_a_stored_run(policy: Any, status: str) -> None:
    store, snapshot = await _stored(status)
    opening = await open_checkpoint(CheckpointOptions(store, "r", if_run_exists=policy))
    assert opening.snapshot == snapshot
    assert opening.writer is not None and opening.writer.saved == 2


async def test_resume_starts_fresh_when_nothing_is_stored() -> None:
    opening = await open_checkpoint(CheckpointOptions(InMemoryCheckpointer(), "r"))
    assert opening.snapshot is None
    assert opening.writer is not None and opening.writer.saved == 0


async def test_resume_only_refuses_when_nothing_is_stored() -> None:
    options = CheckpointOptions(InMemoryCheckpointer(), "r", if_run_exists="resume_only")
    with pytest.raises(UserError, match="nothing is checkpointed") as info:
        await open_checkpoint(options)
    assert info.value.hint


@pytest.mark.parametrize("policy", ["resume", "resume_only"])
async def test_a_failed_run_cannot_be_resumed(policy: Any) -> None:
    store, _ = await _stored("failed")
    with pytest.raises(UserError, match="cannot be resumed") as info:
        await open_checkpoint(CheckpointOptions(store, "r", if_run_exists=policy))
    assert info.value.hint is not None and "restart" in info.value.hint


@pytest.mark.parametrize("status", ["running", "completed", "failed"])
async def test_fail_refuses_an_existing_run(status: str) -> None:
    store, _ = await _stored(status)
    with pytest.raises(UserError, match="already exists"):
        await open_checkpoint(CheckpointOptions(store, "r", if_run_exists="fail"))
    assert await store.load("r") is not None


async def test_restart_deletes_the_stored_run(tmp_path: Path) -> None:
    async with SQLiteCheckpointer(tmp_path / "c.db") as store:
        await store.append("r", [InputEntry("user", "old")], RunHead(agent_name="a"))
        opening = await open_checkpoint(CheckpointOptions(store, "r", if_run_exists="restart"))
        assert opening.snapshot is None
        assert await store.load("r") is None


@pytest.mark.parametrize("policy", ["resume", "restart", "resume_only"])
async def test_a_run_already_in_the_session_only_replays(policy: Any) -> None:
    store, _ = await _stored("running")
    with pytest.raises(UserError, match="already completed in session"):
        await open_checkpoint(
            CheckpointOptions(store, "r", if_run_exists=policy), in_session=True, session_id="s"
        )
    assert await store.load("r") is not None  # refused before anything was deleted


async def test_a_completed_run_in_the_session_replays() -> None:
    store, snapshot = await _stored("completed")
    opening = await open_checkpoint(CheckpointOptions(store, "r"), in_session=True)
    assert opening.snapshot == snapshot


async def test_resume_from_a_snapshot_into_an_empty_store_saves_everything() -> None:
    _, snapshot = await _stored("interrupted")
    fresh = InMemoryCheckpointer()
    opening = await open_checkpoint(CheckpointOptions(fresh, resume_from=snapshot))
    assert opening.snapshot == snapshot
    assert opening.writer is not None and opening.writer.saved == 0


async def test_resume_from_a_snapshot_that_differs_from_the_store_is_refused() -> None:
    store, snapshot = await _stored("interrupted")
    other = dataclasses.replace(snapshot, entries=(InputEntry("user", "something else"),))
    with pytest.raises(UserError, match="does not match"):
        await open_checkpoint(CheckpointOptions(store, resume_from=other))


async def test_resume_from_without_a_store_has_no_writer() -> None:
    _, snapshot = await _stored("interrupted")
    opening = await open_checkpoint(CheckpointOptions(resume_from=snapshot))
    assert opening.snapshot == snapshot
    assert opening.writer is None
