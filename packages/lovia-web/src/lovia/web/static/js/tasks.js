// The open chat's tasks: the task sessions its subagents run in (GET /api/sessions/{id}/tasks),
// each with the status of its latest run, refreshed from the lifecycle bus. Opening one opens
// it as a chat (watch it live, answer its approvals); a task session shows whose task it is.

import { get } from "./api.js";
import { h, show } from "./dom.js";
import { onLangChange, t } from "./i18n.js";
import { onLifecycle, remember, titleOf } from "./sessions.js";

const box = document.getElementById("tasks");
const banner = document.getElementById("task-of");
let sessionId = null;
let parentId = null;
let tasks = [];
let loadToken = 0;

const STATUS_KEYS = {
  pending: "task_pending", running: "task_running", done: "task_done",
  failed: "task_failed", cancelled: "task_cancelled", interrupted: "task_interrupted",
};

async function refresh() {
  const token = ++loadToken;
  if (!sessionId) { tasks = []; draw(); return; }
  let data;
  try {
    data = await get(`/api/sessions/${encodeURIComponent(sessionId)}/tasks`);
  } catch {
    data = { tasks: [] }; // the chat is gone (deleted meanwhile): nothing to list
  }
  if (token !== loadToken) return; // a newer refresh (or another chat) won
  tasks = data.tasks || [];
  for (const task of tasks) remember(task.id, task.title); // a grandchild's banner names it
  draw();
}

function row(task) {
  const status = t(STATUS_KEYS[task.status] || "task_failed");
  return h("li", { class: `task status-${task.status}`, dataset: { id: task.id } },
    h("a", {
      href: `#/c/${encodeURIComponent(task.id)}`, class: "task-open",
      "aria-label": `${t("open_task")}: ${task.title || t("untitled")} (${status})`,
    }, h("span", { class: "title", text: task.title || t("untitled") })),
    h("span", { class: `badge task-status status-${task.status}`, text: status, title: task.error || null }));
}

function draw() {
  show(box, tasks.length > 0);
  const running = tasks.filter((task) => task.status === "running").length;
  box.replaceChildren(
    h("h3", { id: "tasks-title", text: running ? t("tasks_running", { n: tasks.length, running }) : t("tasks_count", { n: tasks.length }) }),
    h("ul", { "aria-labelledby": "tasks-title" }, tasks.map(row)));
}

function drawBanner() {
  show(banner, Boolean(parentId));
  if (!parentId) { banner.replaceChildren(); return; }
  banner.replaceChildren(
    h("span", { text: `${t("task_of")} ` }),
    h("a", { href: `#/c/${encodeURIComponent(parentId)}`, text: titleOf(parentId) || t("parent_chat") }));
}

export function init({ onChat }) {
  onChat((id, detail) => {
    if (id !== sessionId) { tasks = []; draw(); }
    if (detail !== undefined || id !== sessionId) parentId = detail ? detail.parent_id ?? null : null;
    sessionId = id;
    drawBanner();
    refresh();
  });
  // Any chat's run starting or ending, or a new chat: one of them may be ours.
  onLifecycle(() => {
    if (!sessionId) return;
    refresh();
    drawBanner(); // the parent may have been renamed
  });
  onLangChange(() => { draw(); drawBanner(); });
}
