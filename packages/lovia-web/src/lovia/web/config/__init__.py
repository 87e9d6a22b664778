"""``lovia web``'s configuration: the ``config.json`` schema (``schema``), where the file
lives and how it is written (``files``), the connection probe (``probe``) and the runtime
that changes it while the server runs (``runtime``). See docs/web-config.md.

Names resolve lazily, so importing this package loads neither pydantic nor httpx.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "ConfigFile": "lovia.web.config.files",
    "ConfigRuntime": "lovia.web.config.runtime",
    "Connection": "lovia.web.config.schema",
    "ModelProfile": "lovia.web.config.schema",
    "ProbeResult": "lovia.web.config.probe",
    "Roles": "lovia.web.config.schema",
    "SearchConfig": "lovia.web.config.schema",
    "WebConfig": "lovia.web.config.schema",
    "load_config": "lovia.web.config.files",
    "save_config": "lovia.web.config.files",
    "slugify": "lovia.web.config.schema",
    "unlisted_model_note": "lovia.web.config.probe",
    "validate_connection": "lovia.web.config.probe",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'lovia.web.config' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:
    from lovia.web.config.files import ConfigFile as ConfigFile
    from lovia.web.config.files import load_config as load_config
    from lovia.web.config.files import save_config as save_config
    from lovia.web.config.probe import ProbeResult as ProbeResult
    from lovia.web.config.probe import unlisted_model_note as unlisted_model_note
    from lovia.web.config.probe import validate_connection as validate_connection
    from lovia.web.config.runtime import ConfigRuntime as ConfigRuntime
    from lovia.web.config.schema import Connection as Connection
    from lovia.web.config.schema import ModelProfile as ModelProfile
    from lovia.web.config.schema import Roles as Roles
    from lovia.web.config.schema import SearchConfig as SearchConfig
    from lovia.web.config.schema import WebConfig as WebConfig
    from lovia.web.config.schema import slugify as slugify
