"""The PostgreSQL fixtures of the store tests, for the probes that run on both databases."""

from __future__ import annotations

from tests.support import pg_dsn, pg_dsn_or_none, pg_schema  # noqa: F401  (fixtures)
