"""``RunHandle.result()`` after the consumer broke out of its ``async for``.

``result()`` from a task other than the iterating one waits for that iteration to end. A
consumer that breaks out early and then awaits the result through a helper task
(``asyncio.wait_for`` on 3.10/3.11 wraps it in one; so do ``gather`` and ``create_task``)
is such a task: the iteration it waits for is paused forever by the very task waiting.
"""

from __future__ import annotations

import asyncio

import pytest
from lovia import Agent, Runner
from lovia.runtime.result import RunHandleError
from lovia.testing import ScriptedProvider, text


async def test_result_in_the_same_task_after_a_break_raises_at_once() -> None:
    handle = Runner.stream(Agent("h", model=ScriptedProvider([text("done")])), "go")
    async for _ in handle:
        break
    with pytest.raises(RunHandleError, match="abandoned"):
        await handle.result()


@pytest.mark.xfail(
    strict=True,
    reason="a helper task of the consumer cannot be told from another consumer: the handle "
    "does not know the iterating task stopped (Python does not close an async iterator on "
    "`break`); needs an explicit end-of-iteration signal (e.g. `async with handle:`)",
)
async def test_result_through_a_helper_task_after_a_break_does_not_hang() -> None:
    handle = Runner.stream(Agent("h", model=ScriptedProvider([text("done")])), "go")
    async for _ in handle:
        break
    waiter = asyncio.ensure_future(handle.result())
    done, _ = await asyncio.wait({waiter}, timeout=2)
    if not done:
        waiter.cancel()
        with pytest.raises(RunHandleError):
            await handle.result()  # the iterating task closes the abandoned stream
        pytest.fail("result() from a helper task hung after the consumer broke out")
    with pytest.raises(RunHandleError, match="abandoned"):
        waiter.result()
