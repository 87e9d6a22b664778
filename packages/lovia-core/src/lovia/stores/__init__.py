"""Session and checkpoint stores, and URL access to them.

* ``InMemorySession`` / ``InMemoryCheckpointer``: in-process, for tests and notebooks.
* ``SQLiteSession`` / ``SQLiteCheckpointer``: one SQLite file, shared safely by processes.
* ``PostgresSession`` / ``PostgresCheckpointer``: PostgreSQL through psycopg 3 (extra
  ``postgres``), shared by workers on many hosts.

``open_session(url)`` and ``open_checkpointer(url)`` build a store from a URL. A scheme
resolves as a model prefix does (``lovia.providers.registry``), case-insensitively: first
the built-in schemes (``memory``, ``sqlite``, ``postgresql``/``postgres``), then the
``lovia.stores`` entry-point group, where a third-party distribution adds a scheme by
registering a ``from_url(url, *, kind)`` function. An entry point never shadows a built-in
scheme.
"""

from __future__ import annotations

from typing import Literal, overload

from ..checkpointer import Checkpointer
from ..exceptions import UserError
from ..session import Session
from .memory import InMemoryCheckpointer, InMemorySession
from .postgres import PostgresCheckpointer, PostgresSession
from .sqlite import SQLiteCheckpointer, SQLiteSession

__all__ = [
    "InMemoryCheckpointer",
    "InMemorySession",
    "PostgresCheckpointer",
    "PostgresSession",
    "SQLiteCheckpointer",
    "SQLiteSession",
    "open_checkpointer",
    "open_session",
]

# The stores this distribution ships (also registered as its entry points, so that the
# group lists every scheme); resolved first, and without reading the installed metadata.
_BUILTIN = {
    "memory": "lovia.stores.memory",
    "sqlite": "lovia.stores.sqlite",
    "postgresql": "lovia.stores.postgres",
    "postgres": "lovia.stores.postgres",
}


def open_session(url: str) -> Session:
    """A ``Session`` store for ``url`` (e.g. ``sqlite:///var/app/sessions.db``).

    Raises ``UserError`` for a URL without a scheme or with a scheme no installed
    distribution provides.
    """
    return _from_url(url, kind="session")


def open_checkpointer(url: str) -> Checkpointer:
    """A ``Checkpointer`` store for ``url`` (e.g. ``postgresql://app@db/app?schema=lovia``).

    Raises ``UserError`` for a URL without a scheme or with a scheme no installed
    distribution provides.
    """
    return _from_url(url, kind="checkpointer")


@overload
def _from_url(url: str, *, kind: Literal["session"]) -> Session: ...
@overload
def _from_url(url: str, *, kind: Literal["checkpointer"]) -> Checkpointer: ...
def _from_url(url: str, *, kind: Literal["session", "checkpointer"]) -> Session | Checkpointer:
    import importlib

    from ..registry import STORES, entry_points_of

    scheme, sep, _ = url.partition("://") if isinstance(url, str) else ("", "", "")
    scheme = scheme.lower()
    if not sep or not scheme:
        raise UserError(
            f"not a store URL: {url!r}",
            hint="use memory://, sqlite:///path/to/file.db or postgresql://user@host/db",
        )
    if scheme in _BUILTIN:
        factory = importlib.import_module(_BUILTIN[scheme]).from_url
    else:
        entry_points = {name.lower(): ep for name, ep in entry_points_of(STORES).items()}
        entry_point = entry_points.get(scheme)
        if entry_point is None:
            known = sorted(set(entry_points) | set(_BUILTIN))
            raise UserError(
                f"no store is registered for the URL scheme {scheme!r}",
                hint=f"known schemes: {', '.join(known)}; a distribution adds one through the "
                f"{STORES!r} entry-point group",
            )
        try:
            factory = entry_point.load()
        except (ImportError, AttributeError) as exc:
            raise UserError(
                f"entry point {entry_point.name!r} in group {STORES!r} ({entry_point.value}) "
                f"failed to load: {exc}",
                hint="reinstall the distribution that provides it, or check its entry point",
            ) from exc
    store: Session | Checkpointer = factory(url, kind=kind)
    return store
