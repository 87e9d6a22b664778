"""Window resolution and learning: which context window a view is sized against.

The chain, first answer wins: the configured ``context_window``; else what the provider
claims, asked once per run (its endpoint's ``/models`` probe through
``ContextWindowDiscovery``, then its bundled table through ``ContextWindowProvider``);
else unknown, and only the reactive path runs. A window an endpoint names while
rejecting a prompt is learned per endpoint + model and caps whatever the chain found,
downward only, so a deliberately smaller budget is never raised. The latest report
replaces the previous one; a report that a later, larger prompt refutes is dropped.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from lovia.providers.base import ContextWindowDiscovery, ContextWindowProvider

from .state import CompactionState

__all__ = ["WindowProbe", "learn_window", "resolve_window", "window_key"]

_log = logging.getLogger(__name__)


def window_key(provider: object, model: str | None) -> str:
    """The key a learned window is stored under: endpoint + model."""
    endpoint = getattr(provider, "base_url", None) or getattr(provider, "name", None) or "?"
    name = model or getattr(provider, "model", None) or "?"
    return f"{endpoint}|{name}"


def learn_window(
    state: CompactionState,
    key: str,
    *,
    reported: int | None,
    last_input_tokens: int | None,
    overflow: bool,
) -> bool:
    """Fold a rejection's ``reported`` window (and a refutation) into ``state``.

    Returns ``True`` when ``state.learned_windows`` changed.
    """
    changed = False
    valid = isinstance(reported, int) and not isinstance(reported, bool) and reported > 0
    if valid and reported is not None and state.learned_windows.get(key) != reported:
        state.learned_windows[key] = reported
        changed = True
    learned = state.learned_windows.get(key)
    real = last_input_tokens
    if learned is not None and not overflow and isinstance(real, int) and real > learned:
        del state.learned_windows[key]  # a larger prompt went through: the claim is refuted
        changed = True
    return changed


@dataclass(slots=True)
class WindowProbe:
    """Asks the provider for its window once (per run) and remembers the answer."""

    probed: bool = False
    claimed: int | None = None

    async def claimed_by(self, provider: object) -> int | None:
        """The provider's claim: its endpoint first, then its table; failures are logged."""
        if self.probed:
            return self.claimed
        self.probed = True
        if isinstance(provider, ContextWindowDiscovery):
            try:
                self.claimed = await provider.discover_context_window()
            except Exception:  # noqa: BLE001 - fail-open boundary: a failed probe never fails the run
                _log.warning("context window discovery failed", exc_info=True)
        if self.claimed is None and isinstance(provider, ContextWindowProvider):
            try:
                self.claimed = provider.context_window()
            except Exception:  # noqa: BLE001 - fail-open boundary, as above
                _log.warning("provider.context_window() failed", exc_info=True)
        if isinstance(self.claimed, bool) or not isinstance(self.claimed, int) or self.claimed <= 0:
            self.claimed = None
        return self.claimed


def resolve_window(base: int | None, learned: int | None) -> int | None:
    """``base`` (configured or claimed) capped by a ``learned`` window."""
    if learned is None:
        return base
    return learned if base is None else min(base, learned)
