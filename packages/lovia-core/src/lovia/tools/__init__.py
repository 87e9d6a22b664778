"""Tools: ``@tool``/``Tool`` (``lovia.tools.base``) and opt-in tool factories."""
