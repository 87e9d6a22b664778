"""Tools: ``@tool``/``Tool`` and how a call runs (``lovia.tools.base``), and opt-in tool
factories such as ``lovia.tools.recall.make_recall_tool``.

Import from the submodules; this package re-exports nothing, so importing one tool module
never loads the others.
"""

__all__: list[str] = []
