"""Store URLs' query parameters: each scheme names the ones it reads, any other is refused.

A misspelt parameter (``sqlite:///x.db?wall=1``) must not be ignored silently: the store
would then run without what the user asked for.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection
from urllib.parse import parse_qsl

from ..exceptions import UserError


def query_params(url: str, query: str, *, valid: Collection[str]) -> dict[str, str]:
    """The parameters of ``query`` (the last value of each); ``UserError`` for one that is
    not ``valid``."""
    params = dict(parse_qsl(query, keep_blank_values=True))
    for name in params:
        if name not in valid:
            raise unknown_param(url, name, valid)
    return params


def unknown_param(
    url: str, name: str, valid: Collection[str], *, accepted: str | None = None
) -> UserError:
    """The error for a query parameter ``name`` of ``url`` that its store does not read.

    The closest of ``valid`` is suggested; ``accepted`` says what the scheme takes
    (default: ``valid`` listed).
    """
    scheme = url.partition("://")[0]
    close = difflib.get_close_matches(name, list(valid), n=1)
    if accepted is None:
        accepted = ", ".join(sorted(valid)) if valid else "no query parameters"
    hint = f"did you mean {close[0]!r}? " if close else ""
    hint += f"{scheme}:// URLs take {accepted}"
    return UserError(f"unknown query parameter {name!r} in store URL {url!r}", hint=hint)
