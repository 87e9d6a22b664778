"""The SQL store machinery, for distributions that keep tables of their own beside the
core's (the web layer's ``ChatStore``): the script model, the two drivers and the URL parsers.

* A *script* is a generator yielding ``(sql, params)`` and sent each statement's ``Result``;
  a ``Database`` runs one script as one transaction (``read`` / ``write``). Write the SQL
  once with ``?`` placeholders and ``{t}`` before each table name, and ``Statements.render``
  (the database's ``sql``) turns it into the dialect and schema at hand.
* ``SQLiteDatabase`` (sqlite3 in a worker thread) and ``PostgresDatabase`` (a psycopg pool)
  are the drivers the core stores use. Both take ``migrate``: a script factory run once
  when the database is first opened, inside the transaction that creates the core tables
  (``BEGIN IMMEDIATE`` on SQLite, an advisory lock on PostgreSQL), so concurrent openers
  migrate one at a time.
* ``SQLSession`` / ``SQLCheckpointer`` with ``LeaseRows`` / ``AdvisoryLocks`` build the
  core stores on a database you hold, so several stores share one SQLite connection.
* ``encode_json`` is the rows' JSON text (compact, non-ASCII verbatim, a lone surrogate
  escaped); ``storable_id`` says whether a key can be stored at all (no NUL, no lone
  surrogate).
"""

from __future__ import annotations

from ._postgres_db import AdvisoryLocks, PostgresDatabase, quote_ident
from ._rows import _dumps as encode_json
from ._rows import _encodes
from ._sql import (
    Database,
    Dialect,
    Query,
    Result,
    Script,
    SQLCheckpointer,
    SQLSession,
    Statements,
    statement,
)
from ._sqlite_db import LeaseRows, SQLiteDatabase
from .postgres import parse_url as parse_postgres_url
from .sqlite import parse_url as parse_sqlite_url

__all__ = [
    "AdvisoryLocks",
    "Database",
    "Dialect",
    "LeaseRows",
    "PostgresDatabase",
    "Query",
    "Result",
    "SQLCheckpointer",
    "SQLSession",
    "SQLiteDatabase",
    "Script",
    "Statements",
    "encode_json",
    "parse_postgres_url",
    "parse_sqlite_url",
    "quote_ident",
    "statement",
    "storable_id",
]


def storable_id(value: object) -> bool:
    """Whether ``value`` is a non-empty string every store can keep (no NUL, no lone
    surrogate): what ``check_id`` refuses with a ``UserError``."""
    if not isinstance(value, str) or not value or "\x00" in value:
        return False
    return value.isascii() or _encodes(value)
