"""The Schedules, Memory and Settings views in a real browser, each against the server's
own endpoints: what the view shows is what the server keeps, and what it changes sticks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from lovia import Agent, Memory
from lovia.testing import ScriptedProvider, text

from tests.web.ui.test_browser_chat import open_page

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_schedules_create_list_pause_and_delete(page: Any, serve_ui: Any) -> None:
    agent = Agent(name="helper", model=ScriptedProvider([]))
    server = await serve_ui(agent)  # hourly: nothing fires during the test
    p = page.page
    await open_page(page, server.url)
    await p.get_by_role("button", name="Schedules").click()
    view = p.locator("#view-schedules")
    await view.get_by_text("No schedules.").wait_for()

    await view.get_by_label("Instruction").fill("check the build")
    await view.get_by_label("Trigger").select_option("every")
    await view.get_by_label("When (1h, a cron line, or a time)").fill("1h")
    await view.get_by_role("button", name="Create schedule").click()
    await view.locator("#sched-status", has_text="Schedule created.").wait_for()
    row = view.locator("tbody tr", has_text="check the build")
    await row.get_by_role("cell", name="every 1h").wait_for()
    await row.get_by_role("cell", name="active").wait_for()
    await assert_labelled(p, "#view-schedules")
    await page.shot("schedules")

    await row.get_by_role("button", name="Pause: check the build").click()
    await row.get_by_role("cell", name="paused").wait_for()
    (stored,) = (await _get(server.url, "/api/schedules"))["schedules"]
    assert stored["status"] == "paused" and stored["instruction"] == "check the build"

    delete = row.get_by_role("button", name="Delete: check the build")
    await delete.click()
    await delete.filter(has_text="Delete?").wait_for()  # armed: a second click deletes
    await delete.click()
    await view.get_by_text("No schedules.").wait_for()
    assert (await _get(server.url, "/api/schedules"))["schedules"] == []

    await p.locator("#lang-select").select_option("zh")
    await view.get_by_role("button", name="创建计划任务").wait_for()
    await p.locator("#lang-select").select_option("en")


async def test_memory_view_shows_edits_and_saves_the_notes(
    page: Any, serve_ui: Any, tmp_path: Path
) -> None:
    mem = Memory(
        tmp_path / "mem",
        expand_query=False,
        summarize_recall=False,
        index=None,
        auto_curate=False,
        notes_budget=500,
    )
    agent = Agent(name="helper", model=ScriptedProvider([text("ok")]), plugins=[mem])
    server = await serve_ui(agent)
    async with httpx.AsyncClient(base_url=server.url) as client:
        put = await client.put("/api/memory", json={"content": "- Likes tea"})
        assert put.status_code == 200, put.text
    p = page.page
    await open_page(page, server.url)
    await p.get_by_role("button", name="Memory").click()
    view = p.locator("#view-memory")
    editor = view.get_by_label("Memory")
    await view.get_by_role("heading", name="Memory").wait_for()
    assert (await editor.input_value()).strip().endswith("Likes tea")
    before = await view.locator(".memory-meter").inner_text()
    assert before.endswith("of 500 characters")

    await editor.fill(f"{(await editor.input_value()).strip()}\n- Lives in Porto")
    await view.get_by_role("button", name="Save").click()
    await view.get_by_role("status").filter(has_text="Saved.").wait_for()
    assert (await editor.input_value()).splitlines()[-1].endswith("Lives in Porto")
    stored = await _get(server.url, "/api/memory")
    assert stored["content"] == await editor.input_value()
    # The meter follows what was saved.
    await view.locator(".memory-meter", has_text=f"{stored['used']} of 500").wait_for()
    assert await view.locator(".memory-meter").inner_text() != before
    await assert_labelled(p, "#view-memory")
    await page.shot("memory")

    await p.locator("#lang-select").select_option("zh")
    await view.locator(".memory-meter", has_text=f"已用 {stored['used']} / 500 字符").wait_for()
    await p.locator("#lang-select").select_option("en")


async def _settings_server(serve_ui: Any, tmp_path: Path) -> Any:
    """A served UI whose settings (``/api/config``) keep their files under ``tmp_path``."""
    from lovia.web.config.files import load_config
    from lovia.web.config.runtime import ConfigRuntime

    def build(config: Any) -> Agent[Any]:
        return Agent("lovia", model=ScriptedProvider([]))

    loaded = load_config(cwd=tmp_path / "project", home=tmp_path / "home")
    return await serve_ui({}, config_runtime=ConfigRuntime(loaded, build))


async def test_settings_lists_adds_and_deletes_models(
    page: Any, serve_ui: Any, tmp_path: Path
) -> None:
    server = await _settings_server(serve_ui, tmp_path)
    first = {"name": "main", "model": "qwen", "flavor": "openai", "api_key": "sk-main-00001111"}
    async with httpx.AsyncClient(base_url=server.url) as client:
        r = await client.post("/api/config/models", json=first)
        assert r.status_code == 201, r.text
    p = page.page
    await open_page(page, server.url)
    assert not p.url.endswith("#/settings")  # configured: no setup page
    await p.get_by_role("button", name="Settings").click()
    view = p.locator("#view-settings")
    await view.get_by_role("heading", name="Settings").wait_for()
    models = view.locator("table tbody tr")
    await models.filter(has_text="main").get_by_text("…1111").wait_for()
    assert await models.count() == 1
    assert "null" not in await view.inner_text()
    await view.get_by_role("heading", name="Add a model").wait_for()

    await view.get_by_label("Name").fill("spare")
    await view.get_by_label("Model", exact=True).fill("llama")
    await view.get_by_label("API flavour").select_option("anthropic")
    await view.get_by_role("button", name="Save").click()
    await models.filter(has_text="spare").wait_for()
    assert await models.count() == 2
    assert "sk-main" not in await p.content()  # keys are write-only
    await assert_labelled(p, "#view-settings")
    await page.shot("settings")

    await models.filter(has_text="spare").get_by_role("button", name="Delete: spare").click()
    await models.filter(has_text="spare").wait_for(state="detached")
    ids = [m["name"] for m in (await _get(server.url, "/api/config"))["models"]]
    assert ids == ["main"]

    await p.locator("#lang-select").select_option("zh")
    await view.get_by_role("heading", name="设置").wait_for()
    await p.locator("#lang-select").select_option("en")


async def assert_labelled(p: Any, root: str) -> None:
    """Every visible control and link under ``root`` has an accessible name."""
    unlabelled = await p.evaluate(
        """(root) => [...document.querySelector(root)
            .querySelectorAll('a, button, input, select, textarea')]
          .filter((el) => el.offsetParent !== null)
          .filter((el) => !(el.labels && el.labels.length) && !el.getAttribute('aria-label')
                          && !(el.textContent || '').trim())
          .map((el) => el.outerHTML)""",
        root,
    )
    assert unlabelled == []


async def _get(url: str, path: str) -> Any:
    async with httpx.AsyncClient(base_url=url) as client:
        r = await client.get(path)
        r.raise_for_status()
        return r.json()


async def test_a_double_clicked_create_makes_one_schedule(page: Any, serve_ui: Any) -> None:
    # The form sent a POST per submit while the first was still in flight: a double click
    # (or Enter pressed twice) created the same schedule twice.
    server = await serve_ui(Agent(name="helper", model=ScriptedProvider([])))
    p = page.page
    await open_page(page, server.url)
    await p.get_by_role("button", name="Schedules").click()
    view = p.locator("#view-schedules")
    await view.get_by_text("No schedules.").wait_for()
    await view.get_by_label("Instruction").fill("每小时检查构建")
    await view.get_by_label("When (1h, a cron line, or a time)").fill("1h")
    await view.get_by_role("button", name="Create schedule").dblclick()
    await view.locator("#sched-status", has_text="Schedule created.").wait_for()
    await view.locator("tbody tr", has_text="每小时检查构建").wait_for()
    assert len((await _get(server.url, "/api/schedules"))["schedules"]) == 1


async def test_an_unsaved_memory_edit_survives_a_language_switch(
    page: Any, serve_ui: Any, tmp_path: Path
) -> None:
    # The view is rebuilt in the new language from the server's notes: what the user had
    # typed and not saved was silently thrown away.
    mem = Memory(
        tmp_path / "mem2",
        expand_query=False,
        summarize_recall=False,
        index=None,
        auto_curate=False,
    )
    server = await serve_ui(Agent(name="helper", model=ScriptedProvider([]), plugins=[mem]))
    p = page.page
    await open_page(page, server.url)
    await p.get_by_role("button", name="Memory").click()
    view = p.locator("#view-memory")
    editor = view.get_by_label("Memory")
    await view.get_by_role("heading", name="Memory").wait_for()
    await editor.fill("- 喜欢喝茶 (not saved yet)")
    await p.locator("#lang-select").select_option("zh")
    await view.get_by_role("button", name="保存").wait_for()
    assert await view.get_by_label("记忆").input_value() == "- 喜欢喝茶 (not saved yet)"
    await p.locator("#lang-select").select_option("en")
    await view.get_by_role("button", name="Save").wait_for()
    assert await editor.input_value() == "- 喜欢喝茶 (not saved yet)"
    await view.get_by_role("button", name="Save").click()
    await view.get_by_role("status").filter(has_text="Saved.").wait_for()
    assert "喜欢喝茶 (not saved yet)" in (await _get(server.url, "/api/memory"))["content"]


async def test_a_double_clicked_model_save_adds_it_once(
    page: Any, serve_ui: Any, tmp_path: Path
) -> None:
    # As the schedule form: a second submit while the first POST was in flight sent it
    # again (a duplicate model, or the server's "already exists" over a saved one).
    server = await _settings_server(serve_ui, tmp_path)
    first = {"name": "main", "model": "qwen", "flavor": "openai", "api_key": "sk-main-00001111"}
    async with httpx.AsyncClient(base_url=server.url) as client:
        assert (await client.post("/api/config/models", json=first)).status_code == 201
    p = page.page
    await open_page(page, server.url)
    await p.get_by_role("button", name="Settings").click()
    view = p.locator("#view-settings")
    await view.get_by_role("heading", name="Add a model").wait_for()
    await view.get_by_label("Name").fill("spare")
    await view.get_by_label("Model", exact=True).fill("llama")
    await view.get_by_role("button", name="Save").dblclick()
    await view.locator("table tbody tr").filter(has_text="spare").wait_for()
    await p.wait_for_timeout(300)  # a second POST, had one been sent, has its answer by now
    names = [m["name"] for m in (await _get(server.url, "/api/config"))["models"]]
    assert names == ["main", "spare"]


async def test_a_double_clicked_run_now_starts_one_run(page: Any, serve_ui: Any) -> None:
    # Each click on "Run now" posted its own /run before the view was rebuilt: a double
    # click started a second run, or (the first still going) got a 409 whose message and
    # console error the user saw for a run that had started fine.
    agent = Agent(name="helper", model=ScriptedProvider([text("checked"), text("again")]))
    server = await serve_ui(agent)
    async with httpx.AsyncClient(base_url=server.url) as client:
        body = {"instruction": "check the build", "trigger_kind": "every", "trigger_expr": "1h"}
        assert (await client.post("/api/schedules", json=body)).status_code == 201
    p = page.page
    await open_page(page, server.url)
    await p.get_by_role("button", name="Schedules").click()
    row = p.locator("#view-schedules tbody tr", has_text="check the build")
    await row.get_by_role("button", name="Run now: check the build").dblclick()
    await p.locator("#session-list .session").first.wait_for()
    await p.wait_for_timeout(300)  # a second run, had one been started, is listed by now
    runs = (await _get(server.url, "/api/runs/history"))["runs"]
    assert len(runs) == 1, runs
