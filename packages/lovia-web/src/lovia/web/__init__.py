"""lovia.web (distribution lovia-web).

This portion is reserved and importable, but its capabilities have not been
built yet: it exports nothing. See docs/architecture.md for the plan.
"""

__all__: list[str] = []
