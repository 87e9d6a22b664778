"""The run loop's internals (``RunLoop`` and its phases). Internal: import nothing from here.

The user-facing names it defines (``RunHandle``, ``RunResult``) are re-exported from ``lovia``.
"""
