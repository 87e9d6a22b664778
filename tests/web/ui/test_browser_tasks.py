"""The Tasks list in a real browser: a parent chat whose model spawns a subagent lists the
child's task session with its live status; opening it shows the child's run, whose approval
is answered there; the task then reads done. Runs where the server has the tasks endpoint."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest
from lovia import Agent
from lovia.testing import ScriptedProvider, call, text

from tests.web.conftest import deploy
from tests.web.ui.test_browser_chat import open_page, send
from tests.web.ui.test_browser_views import assert_labelled

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.skipif(
        importlib.util.find_spec("lovia.web.routes.tasks") is None,
        reason="this server has no tasks endpoint (lovia.web.routes.tasks)",
    ),
]


async def test_a_spawned_task_is_listed_watched_approved_and_done(page: Any, serve_ui: Any) -> None:
    from lovia.plugins.subagents import Subagents

    worker = Agent(
        name="worker",
        model=ScriptedProvider([call("deploy", {"env": "prod"}), text("42 apples deployed")]),
        tools=[deploy],
    )
    lead = Agent(
        name="lead",
        model=ScriptedProvider(
            [
                call("spawn_subagent", {"prompt": "count the apples"}),
                text("spawned a worker"),
                text("The worker says 42."),
            ]
        ),
        plugins=[Subagents([worker])],
    )
    server = await serve_ui(lead, wire_subagents=True)
    p = page.page
    await open_page(page, server.url)
    await send(page, "count apples in the background")
    await p.locator(".msg.assistant .md", has_text="spawned a worker").wait_for()
    parent_url = p.url
    tasks = p.locator("#tasks")
    task = tasks.locator(".task", has_text="sa_1: count the apples")
    # The child waits on its approval: running until someone answers it.
    await task.locator(".task-status", has_text="running").wait_for()
    assert await tasks.get_by_role("heading").inner_text() == "Tasks (1, 1 running)"
    # The sidebar lists the user's chats only; the task is reached from its chat.
    await p.locator("#session-list .session .title", has_text="count apples").wait_for()
    assert await p.locator("#session-list .session").count() == 1

    await task.get_by_role("link", name="Open task: sa_1: count the apples (running)").click()
    banner = p.locator("#task-of")
    await banner.get_by_role("link", name="count apples in the background").wait_for()
    assert await p.locator("#tasks").is_hidden()  # the child spawned nothing itself
    approval = p.locator(".msg.tool .approval")
    await approval.wait_for()
    await page.shot("task-approval")
    await approval.get_by_role("button", name="Approve").click()
    await p.locator(".msg.assistant .md", has_text="42 apples deployed").wait_for()

    await banner.get_by_role("link").click()
    await p.wait_for_url(parent_url)
    await task.locator(".task-status", has_text="done").wait_for()
    assert await tasks.get_by_role("heading").inner_text() == "Tasks (1)"
    # The report reached the idle parent, which ran on it.
    await p.locator(".msg.assistant .md", has_text="The worker says 42.").wait_for()
    await p.locator("#session-list .badge.live").wait_for(state="detached")  # its run ended
    await assert_labelled(p, "#tasks")
    # Reached from the keyboard, the task's link shows its focus.
    link = task.get_by_role("link")
    await link.focus()
    await p.keyboard.press("Shift+Tab")
    await p.keyboard.press("Tab")
    focused = await p.evaluate(
        "[document.activeElement.className, getComputedStyle(document.activeElement).outlineStyle]"
    )
    assert focused == ["task-open", "solid"]
    await page.shot("tasks")

    # Opened again once done: the child's whole transcript, its prompt first.
    await task.get_by_role("link").click()
    await p.locator(".msg.user .text", has_text="count the apples").wait_for()
    await p.locator(".msg.tool .tool-name", has_text="deploy").wait_for()
    await p.locator(".msg.assistant .md", has_text="42 apples deployed").wait_for()
    await banner.get_by_role("link").click()
    await p.wait_for_url(parent_url)
    # Opened from its record, the report that started the parent's reaction reads as the
    # subagent's, not as the user's words.
    report = p.locator(".msg.report")
    await report.locator(".who", has_text="Report from sa_1 (worker)").wait_for()
    assert await report.locator(".text").inner_text() == "42 apples deployed"
    assert await p.locator(".msg.user .text", has_text="subagent-report").count() == 0

    await p.locator("#lang-select").select_option("zh")
    await task.locator(".task-status", has_text="完成").wait_for()
    assert await tasks.get_by_role("heading").inner_text() == "子任务（1）"
    await report.locator(".who", has_text="来自 sa_1（worker）的报告").wait_for()
    await p.locator("#lang-select").select_option("en")


async def test_many_tasks_leave_the_users_chats_in_the_sidebar(page: Any, serve_ui: Any) -> None:
    # 200 task sessions newer than the user's own chats: the sidebar's one page of 200 held
    # only tasks and, hiding them, showed no chat at all. A task opened from its list still
    # shows its title (the sidebar no longer knows it) and its chat's Tasks heading counts.
    server = await serve_ui(Agent(name="helper", model=ScriptedProvider([text("hi")])))
    store = server.app.state.lovia.store
    await store.create_session("mine", agent="helper", title="my own chat")
    await store.create_session("busy", agent="helper", title="the busy chat")
    for n in range(200):
        await store.create_session(
            f"t{n:03d}", agent="helper", title=f"sa_{n}: job", parent_id="busy"
        )
    p = page.page
    await open_page(page, server.url)
    await p.locator("#session-list .session .title", has_text="my own chat").wait_for()
    assert await p.locator("#session-list .session").count() == 2
    await p.locator("#session-list .session .open", has_text="the busy chat").click()
    await p.locator("#tasks h3", has_text="Tasks (200)").wait_for()
    await p.locator("#tasks .task-open", has_text="sa_7: job").click()
    await p.locator("#chat-title", has_text="sa_7: job").wait_for()
    await p.locator("#task-of a", has_text="the busy chat").wait_for()
