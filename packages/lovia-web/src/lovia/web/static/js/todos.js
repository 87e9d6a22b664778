// The open chat's todo list from the server (rebuilt from its transcript); live updates come
// from the todo_write results in the stream (state.js).

import { get } from "./api.js";
import { chat } from "./state.js";

export function init({ onChat }) {
  onChat(async (id) => {
    if (!id) return;
    const data = await get(`/api/sessions/${encodeURIComponent(id)}/todos`);
    if (chat.sessionId !== id) return;
    const todos = Array.isArray(data) ? data : data.todos || [];
    chat.todos = todos;
    chat.emit("todos");
  });
}
