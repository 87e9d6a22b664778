from __future__ import annotations

import importlib

import lovia
import lovia.context
import pytest
from lovia.context_policy import default_context_policy
from lovia.registry import clear_entry_point_cache

MODULES = [
    "lovia.context",
    "lovia.context.calibration",
    "lovia.context.compaction",
    "lovia.context.policy",
    "lovia.context.prompts",
    "lovia.context.render",
    "lovia.context.stages",
    "lovia.context.state",
    "lovia.context.stores",
    "lovia.context.summarizer",
    "lovia.context.tokens",
    "lovia.context.window",
    "lovia.tools.recall",
]


@pytest.mark.parametrize("name", MODULES)
def test_all_is_sorted_and_names_exist_with_docstrings(name: str) -> None:
    module = importlib.import_module(name)
    exported = module.__all__
    assert list(exported) == sorted(exported)
    for attr in exported:
        value = getattr(module, attr)
        if callable(value) and not isinstance(value, str):
            assert value.__doc__, f"{name}.{attr} has no docstring"


def test_package_exports_every_public_name_of_its_modules() -> None:
    public = {
        n
        for m in MODULES[1:-1]
        for n in importlib.import_module(m).__all__
        if n
        not in {
            "ALPHA",
            "OVERHEAD_MAX",
            "RATIO_MAX",
            "RATIO_MIN",
            "SCRATCH_KEY",
            "check_count",
            "check_reserve",
            "default_reserve",
            "retry_reminder",
            "rendered_frontier",
            "STATE_VERSION",
            "check_watermark",
            "resolve_watermark",
            "render_entry",
            "has_image",
            "missing_sections",
            "WindowProbe",
            "learn_window",
            "resolve_window",
        }
    }
    assert public <= set(lovia.context.__all__)


def test_lovia_re_exports_compaction_lazily() -> None:
    from lovia import Compaction

    assert Compaction is lovia.context.Compaction


def test_compaction_is_the_default_policy_when_installed() -> None:
    clear_entry_point_cache()
    assert isinstance(default_context_policy(), lovia.context.Compaction)
