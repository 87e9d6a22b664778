"""Scale-out: several ``lovia web`` workers on one PostgreSQL, runs on a durable engine.

``RunEngine`` (Celery on RabbitMQ) decides which worker runs a run and hands it to another
when its worker dies; ``Cluster`` joins one worker's ``RunSupervisor`` to the others through
PostgreSQL (the chat claim, ``LISTEN/NOTIFY`` for live events and commands). lovia's
checkpoints stay the source of truth for a run's progress. Needs the ``scale`` extra of
lovia-web; see docs/web-scale.md.
"""

from __future__ import annotations

from .cluster import Cluster, EngineUnavailable
from .engine import RunEngine, RunRejected

__all__ = ["Cluster", "EngineUnavailable", "RunEngine", "RunRejected"]
