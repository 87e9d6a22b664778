"""The scale-out parts that need no broker: refused configurations, each with a hint."""

from __future__ import annotations

import pytest
from lovia.agent import Agent
from lovia.exceptions import UserError
from lovia.testing import ScriptedProvider
from lovia.web import create_app
from lovia.web.scale import RunEngine
from lovia.web.store.base import ChatStore

AMQP = "amqp://guest:guest@127.0.0.1:5672//"


@pytest.mark.parametrize(
    ("url", "needle"),
    [
        ("redis://127.0.0.1:6379/0", "RabbitMQ"),
        ("rediss://cache.internal:6380/0", "RabbitMQ"),
        ("sqs://queue", "unsupported broker"),
        ("127.0.0.1:5672", "unsupported broker"),
    ],
)
def test_only_rabbitmq_is_accepted_as_the_broker(url: str, needle: str) -> None:
    with pytest.raises(UserError, match=needle) as caught:
        RunEngine(url)
    assert caught.value.hint and "amqp://" in caught.value.hint


def test_an_engine_is_built_without_connecting() -> None:
    engine = RunEngine(AMQP, queue="lovia-runs-x", concurrency=3)
    assert (engine.queue, engine.concurrency) == ("lovia-runs-x", 3)
    assert "lovia-runs-x" in repr(engine)
    with pytest.raises(UserError, match="concurrency"):
        RunEngine(AMQP, concurrency=0)


def test_an_engine_needs_a_postgres_store() -> None:
    agent = Agent(name="a", model=ScriptedProvider([]))
    with pytest.raises(UserError, match="PostgreSQL") as caught:
        create_app(agent, store=ChatStore.sqlite(":memory:"), engine=RunEngine(AMQP))
    assert caught.value.hint and "postgresql://" in caught.value.hint
