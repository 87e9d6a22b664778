"""``Todo``: a checklist the model keeps with ``todo_write``, re-shown on every turn.

The list lives in per-run state built by ``setup()``, and the transcript is its durable
record: on the first turn of an activation the state is rebuilt from the newest *valid*
``todo_write`` call already in the transcript (history, a resumed run, or the turns before a
handoff), so the list survives interruptions and handoffs without any store of its own.

The reminder is a view injector: a ``<system-reminder>`` entry appended to each call's view
only, never to the transcript, so it neither accumulates nor disturbs the cached prefix.

At most one item is ``in_progress``; extra ones are demoted to ``pending`` rather than
rejected, because rejecting a whole plan over one flag wastes a turn.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, get_args

from lovia.exceptions import InvalidToolArguments, UserError
from lovia.plugin import PluginInstance
from lovia.tools.base import Tool
from lovia.transcript import InputEntry, ToolCallEntry, ToolResultEntry, TranscriptEntry

if TYPE_CHECKING:
    from lovia.run_context import RunContext

__all__ = ["Todo", "TodoItem", "TodoList", "render_todos", "todos_from_entries"]

TodoStatus = Literal["pending", "in_progress", "completed"]
"""The state of one item."""

_STATUSES: tuple[str, ...] = get_args(TodoStatus)
_MARKS = {"pending": "[ ]", "in_progress": "[>]", "completed": "[x]"}

DEFAULT_INSTRUCTIONS = (
    "## Todo list\n"
    "For work with three or more steps, plan it with `todo_write` and keep the list current: "
    "mark an item `in_progress` before you start it (only one at a time) and `completed` as "
    "soon as it is done. Each call replaces the whole list. Skip the list for trivial tasks."
)


@dataclass(frozen=True, slots=True)
class TodoItem:
    """One checklist item. ``active_form`` is the present-continuous phrasing shown while
    the item is in progress ("Running the tests"); empty means reuse ``content``."""

    content: str
    status: TodoStatus = "pending"
    active_form: str = ""


class TodoList:
    """The per-run list: replaced whole by each ``todo_write``."""

    __slots__ = ("_items", "loaded")

    def __init__(self, items: Iterable[TodoItem] = ()) -> None:
        self._items: tuple[TodoItem, ...] = _one_in_progress(items)
        self.loaded = False
        """Whether the list was rebuilt from the transcript for this activation."""

    @property
    def items(self) -> list[TodoItem]:
        """A detached copy of the items (items are immutable; the list is new)."""
        return list(self._items)

    def replace(self, items: Iterable[TodoItem]) -> list[TodoItem]:
        """Replace the whole list (extra ``in_progress`` items demoted); returns a copy."""
        self._items = _one_in_progress(items)
        self.loaded = True
        return self.items


def render_todos(items: Sequence[TodoItem]) -> str:
    """The list as plain text, one ``[ ]``/``[>]``/``[x]`` line per item.

    An item's text is collapsed to one line, so it can never pose as another item or end
    the reminder it is shown in.
    """
    if not items:
        return "(no todos)"
    lines = []
    for item in items:
        label = item.active_form if item.status == "in_progress" and item.active_form else ""
        lines.append(f"{_MARKS[item.status]} {' '.join((label or item.content).split())}")
    return "\n".join(lines)


def todos_from_entries(
    entries: Sequence[TranscriptEntry], *, tool_name: str = "todo_write"
) -> list[TodoItem]:
    """The list as of the newest valid ``tool_name`` call in ``entries`` (``[]`` if none).

    A call is skipped when its arguments do not parse as a todo list or when its result is
    an error (the tool never ran it, or a human denied it); anything else in ``entries`` is
    ignored, so garbage is tolerated.
    """
    # Walking backwards, each call meets the result that follows it first. Pairing by the
    # nearest result (not by id alone) keeps a reused call id from voiding an older call.
    failed: dict[str, bool] = {}
    for entry in reversed(entries):
        if isinstance(entry, ToolResultEntry):
            failed[entry.call_id] = entry.is_error
        elif isinstance(entry, ToolCallEntry):
            errored = failed.pop(entry.call_id, False)
            if entry.name != tool_name or errored:
                continue
            try:
                args = json.loads(entry.arguments or "{}")
                return list(_one_in_progress(_parse_items(args)))
            except (ValueError, RecursionError, InvalidToolArguments):
                continue
    return []


class Todo:
    """The todo-list plugin: a ``todo_write`` tool plus a per-turn reminder.

    ``inject=False`` turns the reminder off; ``instructions=None`` removes the guidance
    from the system prompt.
    """

    def __init__(
        self,
        *,
        tool_name: str = "todo_write",
        inject: bool = True,
        instructions: str | None = DEFAULT_INSTRUCTIONS,
        name: str = "todos",
    ) -> None:
        if not tool_name:
            raise UserError("Todo(tool_name=) cannot be empty", hint="omit it for 'todo_write'")
        self.name = name
        self.tool_name = tool_name
        self.inject = inject
        self.instructions = instructions

    def __repr__(self) -> str:
        return f"Todo(tool_name={self.tool_name!r}, inject={self.inject!r}, name={self.name!r})"

    async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
        todos = TodoList()

        def current(ctx: RunContext[Any]) -> TodoList:
            # The transcript is loaded after activation, so rebuild on first use, not here.
            if not todos.loaded:
                todos.replace(todos_from_entries(ctx.entries, tool_name=self.tool_name))
            return todos

        async def invoke(args: dict[str, Any], ctx: RunContext[Any]) -> list[TodoItem]:
            return current(ctx).replace(_parse_items(args))

        def reminder(ctx: RunContext[Any]) -> list[TranscriptEntry]:
            items = current(ctx).items
            if not items:
                return []
            body = (
                "Your todo list (update it with "
                f"{self.tool_name} as you progress):\n{render_todos(items)}"
            )
            return [InputEntry("user", f"<system-reminder>\n{body}\n</system-reminder>")]

        write = Tool(
            name=self.tool_name,
            description=(
                "Replace your todo list with `todos` (the whole list, every call). "
                "Statuses: pending, in_progress (at most one), completed."
            ),
            parameters=_PARAMETERS,
            invoke=invoke,
            result_renderer=_render_result,
            parallel=False,  # two writes in one turn must not race on the list
        )
        return PluginInstance(
            tools=(write,),
            instructions=self.instructions or "",
            view_injectors=(reminder,) if self.inject else (),
        )


_ITEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "content": {"type": "string", "description": "What to do (imperative)."},
        "status": {"type": "string", "enum": list(_STATUSES)},
        "active_form": {"type": "string", "description": "Shown while in progress."},
    },
    "required": ["content", "status"],
}
_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"todos": {"type": "array", "items": _ITEM_SCHEMA}},
    "required": ["todos"],
}


def _parse_items(args: Any) -> list[TodoItem]:
    """Validate ``{"todos": [...]}``; raises ``InvalidToolArguments`` naming the bad item."""
    todos = args.get("todos") if isinstance(args, dict) else None
    if not isinstance(todos, list):
        raise InvalidToolArguments("todo_write needs {'todos': [...]}, a list of items")
    items = []
    for i, raw in enumerate(todos):
        if not isinstance(raw, dict):
            raise InvalidToolArguments(f"todos[{i}] must be an object")
        content, status = raw.get("content"), raw.get("status", "pending")
        active_form = raw.get("active_form") or raw.get("activeForm") or ""
        if not isinstance(content, str) or not content.strip():
            raise InvalidToolArguments(f"todos[{i}].content must be a non-empty string")
        if status not in _STATUSES:
            raise InvalidToolArguments(
                f"todos[{i}].status must be one of {', '.join(_STATUSES)}, got {status!r}"
            )
        if not isinstance(active_form, str):
            raise InvalidToolArguments(f"todos[{i}].active_form must be a string")
        items.append(TodoItem(content.strip(), status, active_form.strip()))
    return items


def _one_in_progress(items: Iterable[TodoItem]) -> tuple[TodoItem, ...]:
    """The first ``in_progress`` item stays; later ones are demoted to ``pending``."""
    out = []
    seen = False
    for item in items:
        if item.status == "in_progress":
            if seen:
                item = TodoItem(item.content, "pending", item.active_form)
            seen = True
        out.append(item)
    return tuple(out)


def _render_result(items: list[TodoItem]) -> str:
    return f"Todo list updated:\n{render_todos(items)}"
