"""``RunEngine``: runs dispatched to workers and redelivered by Celery on a message broker.

Each web worker embeds a Celery consumer (the ``threads`` pool, ``concurrency`` threads, in a
thread of the server process) on one queue. Dispatching a run publishes one task naming the
run; the consumer that takes it hands the run to this process's ``RunSupervisor`` on the
server's event loop and blocks its pool thread until the run ends, and only then is the task
acknowledged (``acks_late``). So the broker is the failure detector: when a worker dies, its
connection drops and the broker hands its unacknowledged tasks to another consumer, whose
supervisor resumes each run from its checkpoint.

A prefetch of one task per thread keeps the broker, not a busy worker, holding the runs no
thread is free for. A run interrupted by a graceful shutdown is *rejected with requeue*, so
another worker takes it over at once instead of waiting for this one to come back.

Celery is imported lazily: it is the ``scale`` extra of lovia-web.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import CancelledError as FutureCancelled
from typing import Any

from lovia.exceptions import UserError, install_hint

__all__ = ["RunEngine", "RunRejected", "check_broker_url", "probe_broker"]

logger = logging.getLogger(__name__)

_TASK = "lovia.web.run"
_STOP_SECONDS = 15.0


_WAKE_SECONDS = 0.2
"""How often the consumer's loop wakes to see whether it was asked to stop."""


def _waker_step() -> Any:
    """A consumer bootstep that wakes the consumer's loop every ``_WAKE_SECONDS``: without a
    timer its poll sleeps for seconds, and ``aclose`` (which can only set a flag, as the loop
    owns its connection) would wait for it."""
    from celery import bootsteps

    class Waker(bootsteps.StartStopStep):  # type: ignore[misc]
        requires = ("celery.worker.consumer.tasks:Tasks",)

        def start(self, c: Any) -> None:
            c.timer.call_repeatedly(_WAKE_SECONDS, _noop)

    return Waker


def _noop() -> None:
    return None


def check_broker_url(broker: str) -> None:
    """``UserError`` (with a hint) unless ``broker`` is a RabbitMQ URL: a command line checks
    it before it starts any worker."""
    scheme = broker.split("://", 1)[0].lower() if "://" in broker else ""
    if scheme in ("redis", "rediss", "sentinel"):
        # Celery on Redis hands a dead worker's task on only after its visibility
        # timeout (an hour by default), and hands a run longer than that out twice.
        raise UserError(
            "the run engine needs RabbitMQ: Redis cannot notice a dead worker",
            hint="pass amqp://user:password@host:5672// (see docs/web-scale.md)",
        )
    if scheme not in ("amqp", "amqps", "pyamqp"):
        raise UserError(
            f"unsupported broker URL scheme {scheme!r}",
            hint="pass amqp://user:password@host:5672// (RabbitMQ)",
        )


def probe_broker(broker: str, *, timeout: float = 5.0) -> None:
    """``UserError`` (with a hint) unless the broker at ``broker`` takes a connection within
    ``timeout`` seconds: a command line checks it before it starts any worker, rather than
    each worker waiting for it and failing its startup."""
    try:
        from kombu.connection import Connection
    except ImportError:  # Celery's transport library: the scale extra
        raise UserError("scale-out needs Celery", hint=install_hint("lovia-web", "scale")) from None

    where = broker.rsplit("@", 1)[-1]
    try:
        with Connection(broker, connect_timeout=timeout) as conn:  # type: ignore[no-untyped-call]
            conn.connect()
    except Exception as exc:  # noqa: BLE001 -- sockets, AMQP refusals: no common base
        raise UserError(
            f"cannot reach the message broker at {where}: {type(exc).__name__}: {exc}",
            hint="start RabbitMQ, or check --broker (LOVIA_BROKER): user, password and port",
        ) from None


class RunRejected(Exception):
    """Raised by a task handler: give the task back to the broker for another worker."""


Handler = Callable[[dict[str, Any]], Coroutine[Any, Any, None]]


class RunEngine:
    """One worker's side of the engine: publish runs, and consume them (module docstring).

    ``broker`` is a Celery broker URL (``amqp://`` for RabbitMQ); ``queue`` names the queue
    every worker of one deployment shares; ``concurrency`` is how many runs this worker
    takes at once (its supervisor's slots). ``UserError`` with an install hint when Celery
    is missing.
    """

    def __init__(self, broker: str, *, queue: str = "lovia-runs", concurrency: int = 8) -> None:
        if importlib.util.find_spec("celery") is None:
            raise UserError("scale-out needs Celery", hint=install_hint("lovia-web", "scale"))
        check_broker_url(broker)
        if concurrency < 1:
            raise UserError(
                f"concurrency must be >= 1, got {concurrency}",
                hint="it is how many runs this worker takes at once",
            )
        from celery import Celery

        self.broker = broker
        self.queue = queue
        self.concurrency = concurrency
        self._app = Celery("lovia-web", broker=broker, set_as_current=False)
        self._app.conf.update(
            task_acks_late=True,  # acknowledged only once the run has ended
            task_reject_on_worker_lost=True,
            worker_prefetch_multiplier=1,
            task_ignore_result=True,
            task_default_queue=queue,
            task_serializer="json",
            accept_content=["json"],
            worker_hijack_root_logger=False,
            worker_redirect_stdouts=False,
            broker_connection_retry_on_startup=True,
            task_publish_retry=True,
            # No remote control: its queue is exclusive per node name, and every worker on
            # one host has the same default name, so a second worker would fail to start.
            worker_enable_remote_control=False,
        )
        self._handler: Handler | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._worker: Any = None
        self._thread: threading.Thread | None = None
        self._app.steps["consumer"].add(_waker_step())
        engine = self

        def run(payload: dict[str, Any]) -> None:
            engine._consume(payload)

        self._task = self._app.task(name=_TASK)(run)

    def __repr__(self) -> str:
        return f"RunEngine(queue={self.queue!r}, concurrency={self.concurrency})"

    async def dispatch(self, payload: dict[str, Any]) -> None:
        """Publish a run (JSON ``payload``) for whichever worker is free first."""
        await asyncio.to_thread(self._task.apply_async, (payload,), queue=self.queue)

    async def start(self, handler: Handler, *, timeout: float = 30.0) -> None:
        """Start consuming on the running loop (each task runs ``handler(payload)`` there);
        returns once the consumer is on the queue, so a ready server takes its share of
        runs. ``UserError`` when the broker cannot be reached within ``timeout``."""
        self._handler = handler
        self._loop = asyncio.get_running_loop()
        ready = threading.Event()
        self._worker = self._app.WorkController(
            pool_cls="threads",
            concurrency=self.concurrency,
            queues=[self.queue],
            without_heartbeat=True,
            without_mingle=True,
            without_gossip=True,
            loglevel="WARNING",
            ready_callback=lambda consumer: ready.set(),  # its consumer is on the queue
        )
        self._thread = threading.Thread(target=self._worker.start, name="lovia-engine", daemon=True)
        self._thread.start()
        if not await asyncio.to_thread(ready.wait, timeout):
            await self.aclose()
            raise UserError(
                f"the run engine did not start within {timeout:g} s",
                hint=f"check the message broker at {self._where()} is running",
            )

    def _where(self) -> str:
        """The broker's address without its credentials."""
        return self.broker.rsplit("@", 1)[-1]

    async def aclose(self) -> None:
        """Stop consuming; a task still running ends as its run does (the supervisor's
        shutdown interrupts it, and the task is handed back to the broker)."""
        from celery.worker import state

        thread = self._thread
        self._worker = self._thread = None
        if thread is not None:
            # Celery's connection belongs to the worker's own thread: calling its ``stop``
            # from here would read the socket beside it and hang. Its loop checks this flag
            # (the one its own signal handlers set) and shuts down in its thread.
            state.should_stop = 0
            try:
                await asyncio.to_thread(thread.join, _STOP_SECONDS)
            finally:
                state.should_stop = None
            if thread.is_alive():
                logger.error("the run engine did not stop within %g s", _STOP_SECONDS)

    def _consume(self, payload: dict[str, Any]) -> None:
        """The task body, in a pool thread: run the handler on the loop, wait for it."""
        from celery.exceptions import Reject

        loop, handler = self._loop, self._handler
        if loop is None or handler is None or loop.is_closed():
            raise Reject("this worker is not serving", requeue=True)
        try:
            future = asyncio.run_coroutine_threadsafe(handler(payload), loop)
        except RuntimeError:  # the loop closed meanwhile
            raise Reject("this worker is not serving", requeue=True) from None
        try:
            future.result()
        except (RunRejected, FutureCancelled) as exc:
            # handed back: another worker (or this one, restarted) takes the run over
            raise Reject(str(exc) or "handed back", requeue=True) from None
        except Exception:  # a run's own failure is in its log; the task itself is done
            logger.exception("run task %s failed", payload.get("run_id"))
